"""Text of user objects for log lines and exception messages, safe against broken
``__str__``/``__repr__``.

gactors puts the text of user exceptions (and of the message being processed) into
its own exception messages and failure logs. Those are built inside supervision
itself: if ``str(exc)`` raised there, a child's failure would become a failure of
its supervisor, or leave a restart half done. So the text is taken through these
helpers, which fall back to a placeholder naming the class.
"""

from __future__ import annotations

__all__ = ["failure_text", "safe_repr", "safe_str"]


def safe_str(obj: object) -> str:
    """``str(obj)``, or a placeholder if that raises an ``Exception``."""
    try:
        return str(obj)
    except Exception as e:
        return f"<{type(obj).__name__}: str() raised {type(e).__name__}>"


def safe_repr(obj: object) -> str:
    """``repr(obj)``, or a placeholder if that raises an ``Exception``."""
    try:
        return repr(obj)
    except Exception as e:
        return f"<{type(obj).__name__}: repr() raised {type(e).__name__}>"


def failure_text(exc: BaseException) -> str:
    """``"TypeName: text"`` of an exception, as the failure logs show it."""
    return f"{type(exc).__name__}: {safe_str(exc)}"
