"""Coverage-guided fuzzing of every decoder a remote peer can reach (docs/fuzzing.md).

One harness per target (:mod:`tests.fuzz.targets` lists them): a function that
takes the fuzzer's bytes, feeds them to a decoder whole, one byte at a time
and in uneven pieces, and asserts the decoder's contract -- only its
documented errors escape, its buffered bytes stay within its named limit, the
same stream cut differently gives the same events, and what it answers a
malformed input is the protocol's own error.

``python -m tests.fuzz`` runs them under atheris (libFuzzer);
``tests/fuzz/test_fuzz_short.py`` is CI's short fixed-seed pass.  Nothing here
imports ``junction`` at import time: the runner instruments the project's
modules for coverage before a harness imports them.
"""
