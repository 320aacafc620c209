"""What tracing costs (gactors.contrib.otel): ``python -m benchmarks.tracing``.

Four modes, each a fresh actor system: ``off`` (no ``tracing`` setting), ``idle``
(``tracing = true``, the messages sent outside any span), ``noop`` (inside a span, the
API's no-op tracer: the context travels, no span is recorded) and ``sdk`` (inside a
span, the SDK's tracer: a span per receive, handed to a processor that exports
nowhere, so what is measured is gactors' and the SDK's work, not an exporter's).
Workloads: ``tell`` (N tells from a plain greenlet to one actor) and ``ask`` (N
sequential asks). Wall-clock rounds are interleaved (mode by mode, each round) and the
median is printed with the ratio to ``off``; ``--instructions`` also counts instructions
per message with valgrind (``(I(2N) - I(N)) / N``, as ``benchmarks.instructions``).

Needs ``opentelemetry-sdk`` (the ``test`` extra) and, for ``--instructions``, valgrind.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gevent
import gevent.event

MODES = ("off", "idle", "noop", "sdk")
WORKLOADS = ("tell", "ask")


class _NullExporter:
    """An SDK span exporter that drops everything (the exporter is not what is measured)."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _setup(mode: str) -> tuple[Any, Any]:
    """(actor system config, a tracer whose span is current while sending, or None)."""
    from opentelemetry import trace

    if mode == "off":
        return {}, None
    if mode == "idle":
        return {"tracing": True}, None
    if mode == "noop":
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        span = NonRecordingSpan(SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(1)))
        return {"tracing": {"tracer_provider": trace.NoOpTracerProvider()}}, span
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_NullExporter()))  # type: ignore[arg-type]
    span = provider.get_tracer("bench").start_span("request")
    return {"tracing": {"tracer_provider": provider}}, span


def run(mode: str, workload: str, n: int) -> float:
    """Seconds for ``n`` messages of ``workload`` in ``mode``."""
    from opentelemetry import trace

    from gactors import Actor, ActorSystem, Props

    done = gevent.event.Event()

    class Sink(Actor):
        def __init__(self) -> None:
            self.left = n

        def receive(self, message: Any) -> None:
            if workload == "ask":
                self.sender.tell(message)
                return
            self.left -= 1
            if self.left == 0:
                done.set()

    config, span = _setup(mode)
    with ActorSystem("bench", config=config) as system:
        ref = system.actor_of(Props(Sink))
        ref.ask(-1, timeout=10.0) if workload == "ask" else None

        def loop() -> float:
            t0 = time.perf_counter()
            if workload == "tell":
                send = ref.tell
                for i in range(n):
                    send(i)
                done.wait()
            else:
                ask = ref.ask
                for i in range(n):
                    ask(i, timeout=30.0)
            return time.perf_counter() - t0

        def traced_loop() -> float:
            if span is None:
                return loop()
            with trace.use_span(span, end_on_exit=False):
                return loop()

        return float(gevent.spawn(traced_loop).get())


def _instructions(mode: str, workload: str, n: int) -> float:
    def count(k: int) -> int:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.tracing",
            "--worker",
            mode,
            workload,
            str(k),
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        root = str(Path(__file__).resolve().parent.parent)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
        for line in proc.stderr.splitlines():
            if "Collected" in line:
                return int(line.rsplit(":", 1)[1].strip())
        raise RuntimeError(f"valgrind failed: {proc.stderr[-2000:]}")

    return (count(2 * n) - count(n)) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tracing")
    parser.add_argument("--n", type=int, default=20_000, help="messages per tell round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="also count (valgrind)")
    parser.add_argument(
        "--worker", nargs=3, metavar=("MODE", "WORKLOAD", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.worker:
        mode, workload, k = args.worker
        run(mode, workload, int(k))
        return 0
    sizes = {"tell": args.n, "ask": max(1, args.n // 5)}
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for workload in WORKLOADS:
            for mode in MODES:
                secs = run(mode, workload, sizes[workload])
                samples.setdefault((mode, workload), []).append(secs / sizes[workload])
    print(f"{'workload':<8} {'mode':<6} {'median us/msg':>14} {'x off':>7}")
    for workload in WORKLOADS:
        base = statistics.median(samples[("off", workload)])
        for mode in MODES:
            med = statistics.median(samples[(mode, workload)])
            print(f"{workload:<8} {mode:<6} {med * 1e6:>14.2f} {med / base:>7.2f}")
    if args.instructions:
        print(f"\n{'workload':<8} {'mode':<6} {'instr/msg':>10}")
        for workload in WORKLOADS:
            n = 4_000 if workload == "tell" else 1_000
            for mode in MODES:
                print(
                    f"{workload:<8} {mode:<6} {_instructions(mode, workload, n):>10,.0f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
