"""The on-disk page stores of full PAGE addresses (Artemis ``address-full-policy`` PAGE).

One :class:`PageStore` per paging address holds, in page files of its own
folder, the messages the broker appended instead of routing them into
memory, until the broker depages them into its journal (see
:mod:`.store`).  The modules, each with one job (lower ones first):

* :mod:`.errors` -- what the store refuses with;
* :mod:`.format` -- page file names, headers and records (pure functions);
* :mod:`.position` -- :class:`PagePosition`, the cursor the broker journals;
* :mod:`.pages` -- the accounting of a store's page files, and reading them back;
* :mod:`.tail` -- the records held in memory (unwritten, and newly written);
* :mod:`.cursor` -- the read side: read cursor, records in flight, consumed cursor;
* :mod:`.recovery` -- scanning and repairing the page files at startup;
* :mod:`.store` -- the :class:`PageStore` itself, its folder in the paging
  directory, and finding the paged addresses at startup.
"""

from .errors import (
    PageCorruptionError,
    PageRecordTooLargeError,
    PageStoreClosedError,
    PageStoreFailedError,
    PageStoreStateError,
    PagingError,
)
from .format import (
    FORMAT_VERSION,
    MAX_ADDRESS_BYTES,
    MAX_PAYLOAD_SIZE,
    MAX_RECORDS_PER_PAGE,
    RECORD_OVERHEAD,
    decode_page_header,
    encode_page_header,
    encode_page_record,
    page_file_name,
)
from .position import PagePosition
from .recovery import PageRecovery, PageTornTail
from .store import (
    DEFAULT_PAGE_SIZE,
    MAX_DIR_NAME_CHARS,
    MAX_PENDING_BYTES,
    MIN_PAGE_SIZE,
    READ_AHEAD_BYTES,
    TAIL_CACHE_BYTES,
    PageStore,
    address_dir_name,
    find_paged_addresses,
)

__all__ = [
    "PageStore",
    "PagePosition",
    "PageRecovery",
    "PageTornTail",
    "PagingError",
    "PageStoreFailedError",
    "PageStoreClosedError",
    "PageStoreStateError",
    "PageCorruptionError",
    "PageRecordTooLargeError",
    "address_dir_name",
    "find_paged_addresses",
    "page_file_name",
    "encode_page_header",
    "decode_page_header",
    "encode_page_record",
    "DEFAULT_PAGE_SIZE",
    "MIN_PAGE_SIZE",
    "MAX_PENDING_BYTES",
    "TAIL_CACHE_BYTES",
    "READ_AHEAD_BYTES",
    "MAX_PAYLOAD_SIZE",
    "MAX_ADDRESS_BYTES",
    "MAX_RECORDS_PER_PAGE",
    "MAX_DIR_NAME_CHARS",
    "RECORD_OVERHEAD",
    "FORMAT_VERSION",
]
