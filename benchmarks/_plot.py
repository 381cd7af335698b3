"""Line charts for the benchmark runner: matplotlib when installed (the ``bench`` extra), else a tiny writer.

The benchmarks must run wherever the project's tests run, where plotting
libraries need not be installed, so ``line_chart`` falls back to a writer
of its own (PNG from the standard library alone, zlib): axes (linear or
log 2), one polyline per series in its own colour, point markers, tick
labels and a legend in a 5 x 7 pixel font (digits, letters, a few signs).
``chart_engine()`` says which one draws.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["chart_engine", "line_chart"]

_GLYPHS = {
    "0": "01110100011001110101110011000101110",
    "1": "00100011000010000100001000010001110",
    "2": "01110100010000100010001000100011111",
    "3": "11111000100010000010000011000101110",
    "4": "00010001100101010010111110001000010",
    "5": "11111100001111000001000011000101110",
    "6": "00110010001000011110100011000101110",
    "7": "11111000010001000100010000100001000",
    "8": "01110100011000101110100011000101110",
    "9": "01110100011000101111000010001001100",
    ".": "00000000000000000000000000110001100",
    "-": "00000000000000011111000000000000000",
    "x": "00000000001000101010001000101010001",
    "/": "00000000010001000100010001000000000",
    "k": "10000100001001010100110001010010010",
    "M": "10001110111010110101100011000110001",
    " ": "00000000000000000000000000000000000",
    "%": "11000110010001000100010001001100011",
    "(": "00010001000100001000010000010000010",
    ")": "01000001000001000010000100010001000",
    ":": "00000011000110000000011000110000000",
    "=": "00000000001111100000111110000000000",
}
for _letter, _bits in {
    "a": "00000000000111000001011111000101111",
    "b": "10000100001011011001100011000111110",
    "c": "00000000000111010000100001000101110",
    "d": "00001000010110110011100011000101111",
    "e": "00000000000111010001111111000001110",
    "f": "00110010010100011100010000100001000",
    "g": "00000011111000110001011110000101110",
    "h": "10000100001011011001100011000110001",
    "i": "00100000000110000100001000010001110",
    "l": "01100001000010000100001000010001110",
    "m": "00000000001101010101101011000110001",
    "n": "00000000001011011001100011000110001",
    "o": "00000000000111010001100011000101110",
    "p": "00000000001111010001111101000010000",
    "r": "00000000001011011001100001000010000",
    "s": "00000000000111110000011100000111110",
    "t": "01000010001110001000010000100100110",
    "u": "00000000001000110001100011001101101",
    "v": "00000000001000110001100010101000100",
    "w": "00000000001000110001101011010101010",
    "y": "00000000001000110001011110000101110",
    "z": "00000000001111100010001000100011111",
    "j": "00010000000011000010000101001001100",
    "q": "00000011011001101111000010000100001",
}.items():
    _GLYPHS[_letter] = _bits

_COLOURS = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (23, 190, 207),
    (127, 127, 127),
]
"""One colour per series, in order."""


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, colour: tuple) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            offset = (y * self.width + x) * 3
            self.pixels[offset : offset + 3] = bytes(colour)

    def line(self, x0: float, y0: float, x1: float, y1: float, colour: tuple, thick: int = 1) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for step in range(steps + 1):
            x = round(x0 + (x1 - x0) * step / steps)
            y = round(y0 + (y1 - y0) * step / steps)
            for dx in range(thick):
                for dy in range(thick):
                    self.dot(x + dx, y + dy, colour)

    def text(self, x: int, y: int, text: str, colour: tuple = (0, 0, 0)) -> None:
        for index, character in enumerate(text):
            bits = _GLYPHS.get(character, _GLYPHS.get(character.lower(), _GLYPHS[" "]))
            for row in range(7):
                for column in range(5):
                    if bits[row * 5 + column] == "1":
                        self.dot(x + index * 6 + column, y + row, colour)

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[row * self.width * 3 : (row + 1) * self.width * 3])
            for row in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
        )


def _label(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if value == int(value) and magnitude < 100_000:
        return str(int(value))
    if magnitude >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if magnitude >= 1000:
        return f"{value / 1000:.3g}k"
    if magnitude >= 10:
        return f"{value:.0f}"
    return f"{value:.2g}"


def chart_engine() -> str:
    """Return what draws the charts: ``"matplotlib"`` when it can be imported, else ``"built-in"``."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "built-in"
    return "matplotlib"


def line_chart(
    path: str,
    title: str,
    x_label: str,
    y_label: str,
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    log_x: bool = False,
    y_min: Optional[float] = 0.0,
) -> None:
    """Write a PNG line chart of ``series`` (name → [(x, y), ...]) to ``path``, with matplotlib when installed."""
    chart = _Chart(path, title, x_label, y_label, series, log_x, y_min)
    (_matplotlib_chart if chart_engine() == "matplotlib" else _builtin_chart)(chart)


@dataclass(frozen=True)
class _Chart:
    """What one chart shows, whichever engine draws it."""

    path: str
    title: str
    x_label: str
    y_label: str
    series: dict[str, Sequence[tuple[float, float]]]
    log_x: bool
    y_min: Optional[float]


def _matplotlib_chart(chart: _Chart) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.2), dpi=110)
    try:
        for name, points in chart.series.items():
            if points:
                xs, ys = zip(*sorted(points))
                axes.plot(xs, ys, marker="o", label=name)
        if chart.log_x:
            axes.set_xscale("log", base=2)
        if chart.y_min is not None:
            axes.set_ylim(bottom=chart.y_min)
        axes.set_title(chart.title, fontsize=10)
        axes.set_xlabel(chart.x_label)
        axes.set_ylabel(chart.y_label)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(chart.path)
    finally:
        pyplot.close(figure)


def _builtin_chart(chart: _Chart) -> None:
    """Write ``chart`` as a PNG with the built-in writer."""
    path, title, x_label, y_label, series = chart.path, chart.title, chart.x_label, chart.y_label, chart.series
    log_x, y_min = chart.log_x, chart.y_min
    width, height = 640, 400
    left, right, top, bottom = 60, 40, 30, 50
    canvas = _Canvas(width, height)
    points = [point for values in series.values() for point in values]
    if not points:
        points = [(1.0, 1.0)]

    def x_of(value: float) -> float:
        return math.log2(max(value, 1e-12)) if log_x else value

    xs = [x_of(x) for x, _ in points]
    ys = [y for _, y in points]
    x_low, x_high = min(xs), max(xs)
    y_low = min(ys) if y_min is None else min(y_min, min(ys))
    y_high = max(ys) * 1.1 if max(ys) > y_low else y_low + 1
    if x_high == x_low:
        x_high = x_low + 1

    def to_pixel(x: float, y: float) -> tuple[float, float]:
        px = left + (x_of(x) - x_low) / (x_high - x_low) * (width - left - right)
        py = height - bottom - (y - y_low) / (y_high - y_low) * (height - top - bottom)
        return px, py

    axis = (0, 0, 0)
    canvas.line(left, top, left, height - bottom, axis)
    canvas.line(left, height - bottom, width - right, height - bottom, axis)
    canvas.text(left, 8, title)
    canvas.text(width // 2 - len(x_label) * 3, height - 14, x_label)
    canvas.text(4, top - 14, y_label)
    for tick in range(5):
        value = y_low + (y_high - y_low) * tick / 4
        _, py = to_pixel(points[0][0], value)
        canvas.line(left - 4, py, left, py, axis)
        canvas.text(4, int(py) - 3, _label(value))
    x_ticks = sorted({x for x, _ in points})
    for value in x_ticks if len(x_ticks) <= 10 else x_ticks[:: max(1, len(x_ticks) // 8)]:
        px, _ = to_pixel(value, y_low)
        canvas.line(px, height - bottom, px, height - bottom + 4, axis)
        canvas.text(int(px) - 6, height - bottom + 8, _label(value))
    for index, (name, values) in enumerate(series.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        ordered = sorted(values)
        pixels = [to_pixel(x, y) for x, y in ordered]
        for (x0, y0), (x1, y1) in zip(pixels, pixels[1:]):
            canvas.line(x0, y0, x1, y1, colour, thick=2)
        for x, y in pixels:
            for dx in range(-2, 3):
                for dy in range(-2, 3):
                    canvas.dot(int(x) + dx, int(y) + dy, colour)
        legend_y = top + 4 + index * 11
        canvas.line(width - right - 170, legend_y + 3, width - right - 156, legend_y + 3, colour, thick=2)
        canvas.text(width - right - 150, legend_y, name[:24])
    with open(path, "wb") as handle:
        handle.write(canvas.png())
