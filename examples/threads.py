"""Threads: actors live in one hub thread, but any OS thread may talk to them.

Run: python examples/threads.py

Two situations from real code bases:

1. Work that must not run in the hub: CPU-heavy or unpatched blocking calls (a C
   library, a driver gevent cannot patch). An actor hands it to gevent's thread pool
   and gets the result back as a message, so the hub (and every other actor) keeps
   running meanwhile.
2. Code that runs in real OS threads (a legacy thread pool, a library's callback
   thread) and needs the actors: ``tell`` and ``ask`` work from any thread; an ask
   blocks only the calling thread.
"""

from gevent import monkey

monkey.patch_all()

import hashlib  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from gevent.threadpool import ThreadPool  # noqa: E402

from gactors import Actor, ActorRef, ActorSystem, Props, Status  # noqa: E402


@dataclass(frozen=True)
class Hash:
    password: str


@dataclass(frozen=True)
class Hashed:
    digest: str
    reply_to: ActorRef


def slow_hash(password: str) -> str:
    # CPU-bound: in the hub's thread it would stall every actor for its duration.
    return hashlib.pbkdf2_hmac("sha256", password.encode(), b"salt", 200_000).hex()[:16]


class Hasher(Actor):
    """Hashes in a thread pool; replies when the thread tells it the result."""

    def __init__(self, pool: ThreadPool) -> None:
        self.pool = pool
        self.in_flight = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, Hash):
            me, reply_to = self.ref, self.sender  # refs are safe to use from any thread

            def work() -> None:
                try:
                    me.tell(Hashed(slow_hash(message.password), reply_to))
                except Exception as e:  # a failure in the thread goes back to the asker
                    reply_to.tell(Status.Failure(e))

            self.in_flight += 1
            self.pool.spawn(work)  # returns at once: the actor is free for more messages
        elif isinstance(message, Hashed):
            self.in_flight -= 1
            message.reply_to.tell(message.digest)
        elif message == "in flight":
            self.sender.tell(self.in_flight)
        else:
            self.unhandled(message)


class Counter(Actor):
    def __init__(self) -> None:
        self.n = 0

    def receive(self, message: Any) -> None:
        if message == "get":
            self.sender.tell(self.n)
        else:
            self.n += message


def main() -> None:
    pool = ThreadPool(4)  # real OS threads, even under patch_all()
    try:
        with ActorSystem("threads") as system:
            hasher = system.actor_of(Props(Hasher, pool), "hasher")
            counter = system.actor_of(Props(Counter), "counter")

            # 1. Four hashes run in threads while the hub keeps serving other asks.
            started = time.monotonic()
            pending = [hasher.ask(Hash(f"pw-{i}"), timeout=30.0, block=False) for i in range(4)]
            pings = 0
            while not all(f.done() for f in pending):
                counter.ask("get", timeout=5.0)
                pings += 1
                gevent.sleep(0.01)
            digests = [f.get(timeout=1.0) for f in pending]
            print(f"4 hashes in threads took {time.monotonic() - started:.2f} s;")
            print(f"meanwhile the hub answered {pings} asks from the main greenlet")
            print("digests:", digests)

            # 2. Legacy code in OS threads: each thread tells 100 times and asks once.
            def legacy_job(i: int) -> int:
                for _ in range(100):
                    counter.tell(1)
                result: int = counter.ask("get", timeout=10.0)  # blocks this thread only
                return result

            before = counter.ask("get", timeout=5.0)
            results = [pool.spawn(legacy_job, i) for i in range(8)]
            for r in results:
                r.get(timeout=30.0)  # waits cooperatively: the hub keeps running
            total = counter.ask("get", timeout=5.0) - before
            print(f"8 OS threads told the counter {total} times, nothing lost")
    finally:
        pool.kill()


if __name__ == "__main__":
    main()
