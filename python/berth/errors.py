"""Errors of the berth SDK: the head's message, with its gRPC status code."""

from __future__ import annotations

from typing import Optional


class BerthError(Exception):
    """An error from berth; ``code`` is the gRPC status code's name."""

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code


class InvalidArgumentError(BerthError, ValueError):
    """The request was refused: its message names the field."""

    def __init__(self, message: str, code: Optional[str] = "INVALID_ARGUMENT") -> None:
        super().__init__(message, code)


class NotFoundError(BerthError, LookupError):
    """No such job (or other object)."""


class UnavailableError(BerthError, ConnectionError):
    """The head could not be reached."""


def from_rpc_error(error) -> BerthError:
    """The BerthError for a grpc.RpcError."""
    code = error.code().name if error.code() is not None else None
    message = error.details() or str(error)
    if code == "INVALID_ARGUMENT":
        return InvalidArgumentError(message)
    if code == "NOT_FOUND":
        return NotFoundError(message, code)
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return UnavailableError(message, code)
    return BerthError(message, code)
