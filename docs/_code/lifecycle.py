"""Concepts, the restart sequence: which hook runs when, on which instance."""

from gevent import monkey

monkey.patch_all()

from typing import Any  # noqa: E402

from gactors import Actor, ActorSystem, Identify, PoisonPill, Props  # noqa: E402

log: list[str] = []


# [start hooks]
class Child(Actor):
    def __init__(self, name: str) -> None:
        self.name = name
        log.append(f"{name}: __init__")

    def pre_start(self) -> None:
        log.append(f"{self.name}: pre_start")

    def post_stop(self) -> None:
        log.append(f"{self.name}: post_stop")

    def receive(self, message: Any) -> None:
        pass


class Parent(Actor):
    def __init__(self) -> None:
        self.incarnation = len([e for e in log if e == "parent: __init__"]) + 1
        log.append("parent: __init__")
        self.context.actor_of(Props(Child, f"child-{self.incarnation}"), "child")

    def pre_start(self) -> None:
        log.append("parent: pre_start")

    def receive(self, message: Any) -> None:
        if message == "fail":
            raise RuntimeError("boom")

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        log.append(f"parent: pre_restart({reason!r}, {message!r}) on the old instance")
        super().pre_restart(reason, message)  # default: stop the children, post_stop()

    def post_restart(self, reason: BaseException) -> None:
        log.append(f"parent: post_restart({reason!r}) on the new instance")
        super().post_restart(reason)  # default: pre_start()

    def post_stop(self) -> None:
        log.append("parent: post_stop")


# [end hooks]

if __name__ == "__main__":
    import logging

    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failure is on purpose
    with ActorSystem("lifecycle") as system:
        parent = system.actor_of(Props(Parent), "parent")

        def settle() -> None:
            """Wait until the parent and its current child have started."""
            parent.ask(Identify(0), timeout=1.0)
            child = system.lookup("/user/parent/child")
            assert child is not None
            child.ask(Identify(0), timeout=1.0)

        settle()
        log.append("-- restart")
        parent.tell("fail")
        settle()  # Identify is answered by the new instance, after the restart
        log.append("-- stop")
        parent.tell(PoisonPill)
    print("\n".join(log))
