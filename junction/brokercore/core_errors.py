"""What the broker core refuses, as CORE exception codes (Artemis's ``ActiveMQExceptionType``).

A refused operation raises a :class:`junction.model.errors.BrokerError` (its
``kind`` is Artemis's type name), a ``SecurityError`` (SECURITY_EXCEPTION,
105, with Artemis's AMQ229032/AMQ229213 text), a journal error (IO_ERROR, 6,
when a write or sync failed), or, for what only the CORE
adapter refuses, a :class:`CoreRefused` carrying its code.
:func:`exception_for` turns any of them into the ``(code, text)`` of the
EXCEPTION packet that answers it.
"""

from __future__ import annotations

from junction.brokercore.journal.errors import JournalError
from junction.brokercore.security import SecurityError
from junction.model import errors
from junction.protocols.core import ExceptionType

__all__ = ["CoreRefused", "REFUSALS", "exception_for"]


class CoreRefused(Exception):
    """The CORE adapter refuses a request: answered with ``code`` (an :class:`ExceptionType`) and the text."""

    def __init__(self, code: ExceptionType, message: str):
        super().__init__(message)
        self.code = code


#: ``BrokerError.kind`` -> the CORE code it is answered with.
_CODES = {
    "INTERNAL_ERROR": ExceptionType.INTERNAL_ERROR,
    "ADDRESS_FULL": ExceptionType.ADDRESS_FULL,
    "QUEUE_DOES_NOT_EXIST": ExceptionType.QUEUE_DOES_NOT_EXIST,
    "ADDRESS_DOES_NOT_EXIST": ExceptionType.ADDRESS_DOES_NOT_EXIST,
    "QUEUE_EXISTS": ExceptionType.QUEUE_EXISTS,
    "MAX_CONSUMERS_REACHED": ExceptionType.MAX_CONSUMER_LIMIT_EXCEEDED,
    "INVALID_ROUTING_TYPE": ExceptionType.UNEXPECTED_ROUTING_TYPE_FOR_ADDRESS,
    "INVALID_FILTER_EXPRESSION": ExceptionType.INVALID_FILTER_EXPRESSION,
    "IO_ERROR": ExceptionType.IO_ERROR,
    "TRANSACTION_ROLLED_BACK": ExceptionType.TRANSACTION_ROLLED_BACK,
}

#: Everything a handler may raise for the client's request (answered, the connection stays).
REFUSALS: tuple = (errors.BrokerError, SecurityError, CoreRefused)


def exception_for(error: BaseException) -> tuple[int, str]:
    """``(code, text)`` of the EXCEPTION answering ``error``."""
    if isinstance(error, CoreRefused):
        return int(error.code), str(error)
    if isinstance(error, errors.AddressFullError) and error.address is not None:
        # Artemis's text, which the client shows as the JMSException's message
        return int(ExceptionType.ADDRESS_FULL), f'AMQ229102: Address "{error.address}" is full.'
    if isinstance(error, errors.BrokerError):
        return int(_CODES.get(error.kind, ExceptionType.INTERNAL_ERROR)), str(error)
    if isinstance(error, SecurityError):
        return int(ExceptionType.SECURITY_EXCEPTION), str(error)
    if isinstance(error, (JournalError, OSError)):
        return int(ExceptionType.IO_ERROR), f"the journal failed: {error}"
    return int(ExceptionType.INTERNAL_ERROR), f"internal error: {error}"
