"""Durable reminders (SPEC section 20): timers that survive processes.

``Reminders(system).register(name, message, entity=(type_name, entity_id) |
singleton=name | path=..., due=..., period=None, misfire="once")``; inside an entity,
a singleton or (single process) any actor: ``self.context.reminders``. See
docs/reminders.md.
"""

from gactors.reminders._extension import ActorReminders, Reminders, RemindersExtension
from gactors.reminders._model import MAX_CATCH_UP, MISFIRE

__all__ = ["MAX_CATCH_UP", "MISFIRE", "ActorReminders", "Reminders", "RemindersExtension"]
