"""Draw the concept diagrams of the docs as plain SVG (no Graphviz, no dependencies).

Run from the repository root after changing a diagram, and commit the result::

    python docs/_scripts/diagrams.py     # writes docs/_static/*.svg

Every picture has its own white background so that it stays readable with the dark
theme.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "_static"

INK = "#1f2933"
MUTED = "#7b8794"
ACCENT = "#2f6fde"
FAIL = "#d64545"
OK = "#2f9e44"
BOX = "#eef2f7"
SYS = "#fff4e0"
SYS_INK = "#c98a1b"
FONT = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


class Svg:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.parts: list[str] = [
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff" rx="8"/>'
        ]

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str = BOX,
        stroke: str = INK,
        rx: float = 6,
        dash: bool = False,
        width: float = 1.2,
    ) -> None:
        d = ' stroke-dasharray="5 4"' if dash else ""
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"{d}/>'
        )

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: int = 13,
        color: str = INK,
        anchor: str = "middle",
        weight: str = "normal",
        italic: bool = False,
        mono: bool = False,
    ) -> None:
        style = "font-family:ui-monospace,Menlo,Consolas,monospace" if mono else FONT
        st = ' font-style="italic"' if italic else ""
        self.parts.append(
            f'<text x="{x}" y="{y}" font-size="{size}" fill="{color}" text-anchor="{anchor}" '
            f'font-weight="{weight}" style="{style}"{st}>{escape(s)}</text>'
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        color: str = INK,
        arrow: bool = True,
        dash: bool = False,
        width: float = 1.4,
    ) -> None:
        m = ' marker-end="url(#arrow-' + color.lstrip("#") + ')"' if arrow else ""
        d = ' stroke-dasharray="5 4"' if dash else ""
        self.parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" '
            f'stroke-width="{width}"{d}{m}/>'
        )

    def path(self, d: str, color: str = INK, arrow: bool = True, width: float = 1.4) -> None:
        m = ' marker-end="url(#arrow-' + color.lstrip("#") + ')"' if arrow else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"{m}/>')

    def circle(self, x: float, y: float, r: float, fill: str, stroke: str = INK) -> None:
        self.parts.append(
            f'<circle cx="{x}" cy="{y}" r="{r}" fill="{fill}" stroke="{stroke}" '
            'stroke-width="1.2"/>'
        )

    def render(self, title: str) -> str:
        markers = "".join(
            f'<marker id="arrow-{c.lstrip("#")}" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{c}"/></marker>'
            for c in (INK, MUTED, ACCENT, FAIL, OK, SYS_INK)
        )
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
            f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" role="img" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
            f"<defs>{markers}</defs>" + "".join(self.parts) + "</svg>\n"
        )


# -- actors and the mailbox -----------------------------------------------------------------
def mailbox() -> str:
    s = Svg(760, 300)
    s.text(20, 30, "An actor: a mailbox, a behaviour, its state", 15, anchor="start", weight="bold")
    # senders
    for i, name in enumerate(("request greenlet", "another actor", "an OS thread")):
        y = 70 + i * 62
        s.rect(20, y, 140, 38)
        s.text(90, y + 24, name)
        s.line(160, y + 19, 236, 150, ACCENT)
    s.text(200, 64, "tell / ask", 12, MUTED)
    # system queue
    s.rect(240, 56, 250, 40, fill=SYS, stroke=SYS_INK)
    s.text(365, 81, "system messages (go first)", 12)
    s.path("M 490 76 C 530 76 540 120 566 130", SYS_INK)
    # mailbox
    s.rect(240, 124, 250, 52, fill="#ffffff")
    for i in range(4):
        s.rect(250 + i * 58, 132, 50, 36, fill=BOX)
        s.text(275 + i * 58, 155, f"m{4 - i}", mono=True)
    s.text(365, 196, "mailbox (FIFO, per actor)", 12, MUTED)
    s.line(490, 150, 566, 150)
    # actor
    s.rect(570, 100, 170, 110, fill="#e7f0ff", stroke=ACCENT)
    s.text(655, 124, "actor", 14, ACCENT, weight="bold")
    s.text(655, 148, "receive(message)", 12, mono=True)
    s.text(655, 170, "state (self.n, ...)", 12)
    s.text(655, 192, "one message at a time", 12, MUTED, italic=True)
    s.text(
        490,
        250,
        "Idle: no greenlet at all. With work: a worker greenlet runs up to",
        12,
        MUTED,
    )
    s.text(490, 268, "dispatcher_throughput messages, then lets the next actor run.", 12, MUTED)
    return s.render("An actor receives messages from its mailbox one at a time")


# -- one-for-one versus all-for-one -----------------------------------------------------------
def strategies() -> str:
    s = Svg(760, 290)

    def panel(x0: float, title: str, subtitle: str, restarted: set[str]) -> None:
        s.rect(x0, 14, 350, 262, fill="#fbfcfd", stroke=MUTED, rx=10)
        s.text(x0 + 175, 40, title, 15, weight="bold", mono=True)
        s.text(x0 + 175, 60, subtitle, 12, MUTED)
        s.rect(x0 + 115, 76, 120, 36, fill="#e7f0ff", stroke=ACCENT)
        s.text(x0 + 175, 99, "supervisor")
        for i, name in enumerate(("a", "b", "c")):
            cx = x0 + 65 + i * 110
            failed = name == "b"
            s.line(x0 + 175, 112, cx, 164, MUTED, arrow=False)
            s.circle(cx, 186, 22, "#fde8e8" if failed else BOX, FAIL if failed else INK)
            s.text(cx, 191, name, 15, weight="bold")
            if failed:
                s.text(cx + 30, 170, "✗ fails", 12, FAIL, anchor="start")
            if name in restarted:
                s.path(f"M {cx - 16} 215 A 20 20 0 1 0 {cx + 16} 215", OK, arrow=True, width=1.6)
                s.text(cx, 258, "restarted", 12, OK)
            else:
                s.text(cx, 258, "untouched", 12, MUTED)

    panel(10, "OneForOneStrategy", "the directive applies to the failing child", {"b"})
    panel(400, "AllForOneStrategy", "the directive applies to every child", {"a", "b", "c"})
    return s.render("One-for-one restarts only the failing child; all-for-one restarts all")


# -- the restart sequence ----------------------------------------------------------------------
def restart_sequence() -> str:
    s = Svg(840, 700)
    lanes = {"parent": 160, "actor": 440, "children": 710}
    labels = {
        "parent": "parent (supervisor)",
        "actor": "the failing actor",
        "children": "its children",
    }
    for key, x in lanes.items():
        s.rect(
            x - 90,
            16,
            180,
            36,
            fill="#e7f0ff" if key == "actor" else BOX,
            stroke=ACCENT if key == "actor" else INK,
        )
        s.text(x, 39, labels[key], weight="bold")
    lifelines_at = len(s.parts)

    y = 80

    def note(lane: str, text: str, tag: str = "", color: str = INK, fill: str = "#ffffff") -> None:
        nonlocal y
        x = lanes[lane]
        s.rect(x - 125, y, 250, 30, fill=fill, stroke=color)
        s.text(x, y + 20, text, 12, color)
        if tag:
            s.text(x - 135, y + 20, tag, 13, ACCENT, anchor="end", weight="bold")
        y += 44

    def msg(
        src: str, dst: str, text: str, color: str = INK, system: bool = True, tag: str = ""
    ) -> None:
        nonlocal y
        y += 12
        x1, x2 = lanes[src], lanes[dst]
        if tag:
            s.text(min(x1, x2) - 10, y + 4, tag, 13, ACCENT, anchor="end", weight="bold")
        s.line(x1, y, x2 + (-6 if x2 > x1 else 6), y, color, dash=not system)
        s.text((x1 + x2) / 2, y - 7, text, 12, color, mono=True)
        y += 34

    note("actor", "receive(message) raises cause", color=FAIL, fill="#fde8e8")
    note("actor", "suspend itself and its subtree", "a")
    msg("actor", "parent", "Failed(cause)")
    note("parent", "strategy: decider(cause) → RESTART")
    msg("parent", "actor", "Recreate(cause)")
    note("actor", "old.pre_restart(cause, message)", "b")
    msg("actor", "children", "stop (default pre_restart)", MUTED, system=False)
    msg("children", "actor", "terminated", MUTED, system=False)
    note("actor", "wait until they have stopped", "c")
    note("actor", "new = factory(*args)  (Props)", "d", ACCENT, "#e7f0ff")
    note("actor", "new.post_restart(cause)", "e", ACCENT, "#e7f0ff")
    msg("actor", "children", "Recreate(cause)  (survivors)", MUTED, tag="f")
    note("actor", "resume: next message in the mailbox", "g", OK, "#e6f6ea")
    s.text(
        20,
        y + 6,
        "The ref, the mailbox and the watchers stay; the failing message is not processed again.",
        12,
        MUTED,
        anchor="start",
    )
    s.text(
        20,
        y + 24,
        "The letters are the steps (a) to (g) of the restart sequence; dashed arrows are "
        "the default behaviour.",
        12,
        MUTED,
        anchor="start",
    )
    s.height = int(y + 40)
    s.parts[0] = f'<rect x="0" y="0" width="{s.width}" height="{s.height}" fill="#ffffff" rx="8"/>'
    # Lifelines last in the list, but drawn first (behind the boxes).
    lifelines = [
        f'<line x1="{x}" y1="52" x2="{x}" y2="{y - 14}" stroke="{MUTED}" stroke-width="1.2" '
        'stroke-dasharray="5 4"/>'
        for x in lanes.values()
    ]
    s.parts[lifelines_at:lifelines_at] = lifelines
    return s.render("The restart sequence of a failing actor")


# -- guardians and shutdown --------------------------------------------------------------------
def guardians() -> str:
    s = Svg(780, 380)

    def node(x: float, y: float, label: str, kind: str = "user", order: str = "") -> None:
        fill = {"guardian": "#e7f0ff", "user": BOX, "system": SYS}[kind]
        stroke = {"guardian": ACCENT, "user": INK, "system": SYS_INK}[kind]
        w = max(86, 9 * len(label) + 24)
        s.rect(x - w / 2, y - 17, w, 34, fill=fill, stroke=stroke)
        s.text(x, y + 5, label, 13, weight="bold" if kind == "guardian" else "normal", mono=True)
        if order:
            s.circle(x + w / 2 + 2, y - 17, 11, "#ffffff", FAIL)
            s.text(x + w / 2 + 2, y - 13, order, 11, FAIL, weight="bold")

    def edge(x1: float, y1: float, x2: float, y2: float) -> None:
        s.line(x1, y1 + 17, x2, y2 - 17, MUTED, arrow=False)

    s.text(
        20,
        30,
        "The guardians, and the order in which terminate() stops everything",
        15,
        anchor="start",
        weight="bold",
    )
    node(390, 70, "/", "guardian", "9")
    node(230, 150, "/user", "guardian", "6")
    node(560, 150, "/system", "guardian", "8")
    edge(390, 70, 230, 150)
    edge(390, 70, 560, 150)
    node(130, 230, "orders", order="4")
    node(330, 230, "accounts", order="5")
    edge(230, 150, 130, 230)
    edge(230, 150, 330, 230)
    node(70, 310, "pricer", order="1")
    node(190, 310, "packer", order="2")
    node(330, 310, "ledger", order="3")
    edge(130, 230, 70, 310)
    edge(130, 230, 190, 310)
    edge(330, 230, 330, 310)
    node(560, 230, "framework actors", "system", "7")
    edge(560, 150, 560, 230)
    s.line(510, 150, 282, 150, SYS_INK, dash=True)
    s.text(396, 172, "/system watches /user", 12, SYS_INK)
    s.text(
        20,
        362,
        "Children stop before their parents; /system outlives /user, so logging and other "
        "framework actors work until the end.",
        12,
        MUTED,
        anchor="start",
    )
    return s.render("The root, user and system guardians and the shutdown order")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, fn in (
        ("mailbox", mailbox),
        ("strategies", strategies),
        ("restart-sequence", restart_sequence),
        ("guardians", guardians),
    ):
        (OUT / f"{name}.svg").write_text(fn(), encoding="utf-8")
        print("wrote", OUT / f"{name}.svg")


if __name__ == "__main__":
    main()
