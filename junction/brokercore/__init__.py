"""A broker node: addresses, queues, consumers, journal and security (Artemis model)."""
