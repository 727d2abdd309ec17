"""Reading and validating ``broker.xml`` (Artemis dialect) into :mod:`junction.config.model`."""
