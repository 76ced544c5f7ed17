# npuprof's program for one torch_npu rank, run on the target next to the
# rank's data (Python 3.8+, standard library only). It is the one definition
# of a rank's kernel summary: the worker keeps only the C++ reference
# (parsers/kernel_summary.h), which a differential test holds equal to this.
#
#   python3 -c SRC digest DIR MARKER BUDGET_MS FINAL LAUNCH_SCRIPT
#       Start-or-attach analyse() (when LAUNCH_SCRIPT is not empty: it is run
#       as `sh -c LAUNCH_SCRIPT npuprof-analyse DIR MARKER`, the marker
#       protocol of workers/profiling/remote_analyse.h), wait up to BUDGET_MS
#       for MARKER.rc (polls 10 ms doubling to 100 ms, the process checked at
#       each poll), then print one JSON object (ASCII) on stdout. The rank's
#       outputs are read only once analyse() has ended (or vanished), or when
#       FINAL is 1. kernel_details.csv's summary and trace_view.json's check
#       run at once (the check in a forked child; here when no fork).
#   python3 rank_digest.py summary MAX_DISTINCT FILE... | trace FILE...
#       The kernel summary (or the trace_view.json check) of each file, one
#       JSON line per file: the differential tests.
#
# Memory stays bounded whatever the files' size: the CSV is read in 64 KiB
# pieces and aggregated per distinct kernel (a piece's durations are held
# until the piece is folded in); trace_view.json is validated a run of whole
# events of its event array at a time (no element above 64 MiB; at most 8 MiB
# of event shapes kept).
#
# Speed: KernelSummary takes a piece of whole lines with one regular
# expression first (_rows: one findall gives only the columns read, the
# names, types and cores as one group split once per distinct value, the
# start times and durations as plain decimals; once a piece's quoting of
# them is known, a loose pattern of that quoting is tried first: single-byte
# scans only, its groups checked in bulk afterwards (_loose), most start
# times compared as bytes instead of converted (_window)), then
# column by column
# (_columns: each step one call over all the piece's lines), other whole
# lines one by one (_lines: split at the commas up to the last column read,
# plain decimals converted directly); both fold the sums per piece in the
# rows' order, so the output is byte for byte CsvReader's; the header,
# records spanning lines and lines whose quotes it cannot take go to
# CsvReader. The pieces are small so that their objects reuse the memory
# the allocator keeps (1 MiB pieces cost a page fault per 4 KiB of them).
# trace_view.json's runs of whole events are taken by their shapes when
# they can (TraceChecker.shaped: every digit read as 1, each distinct shape
# decoded once), else decoded at once with the C scanner.
import codecs
import collections
import functools
import json
import math
import operator
import os
import re
import subprocess
import sys
import time
from itertools import compress, repeat

MAX_NAME = 256
OTHER = b"(other kernels)"
MAX_CELL = 64 * 1024
MAX_CELLS = 4096
TOP_N = 30
MAX_TYPES = 64
CHUNK = 64 << 10  # small pieces: their copies and objects reuse the heap's memory (keep_freed_memory)
LOG_PART = 16 * 1024
MAX_JSON_VALUE = 64 << 20
MAX_MAG = 9223372036854775808.0
KD_NEEDED = (b"Name", b"Type", b"Accelerator Core", b"Start Time(us)", b"Duration(us)")


# ---- text ------------------------------------------------------------------

def text(b):
    """Bytes shown as text: invalid UTF-8 replaced (maximal subparts)."""
    return b.decode("utf-8", "replace")


def truncate_text(b, max_bytes, marker="\u2026"):
    valid = text(b).encode("utf-8")
    if len(valid) <= max_bytes:
        return valid.decode("utf-8")
    cut = max_bytes
    while cut > 0 and (valid[cut] & 0xC0) == 0x80:
        cut -= 1
    return valid[:cut].decode("utf-8") + marker


# ---- CSV records (the rules of parsers/csv_records.h) -----------------------

_SPACE = b" \t\r\n\f\v"


class CsvReader(object):
    """Records of CSV bytes fed in pieces: ',' splits cells, '\\n' records,
    "..." quotes ("" is a quote; a quoted cell may span lines), cells trimmed,
    blank records skipped, a BOM at the very start dropped, cells cut at
    MAX_CELL bytes, records at MAX_CELLS cells. on_record(cells, index)
    returns False to stop. A whole line is split at once (at its quotes,
    then at the commas outside them); a record that goes on past its line
    (a quote left open) or past the piece is read cell by cell (`open`
    holds it: [cells, cell, in_quotes, has_content])."""

    def __init__(self, on_record):
        self.on_record = on_record
        self.index = 0
        self.stopped = False
        self.start = b""
        self.at_start = True
        self.pending_quote = False  # a '"' inside quotes ended the last piece
        self.open = None
        self.limit = None   # cells wanted per record (None: all); ncells says how many it had
        self.ncells = 0

    def feed(self, data):
        if self.stopped:
            return
        if self.at_start:
            self.start += data
            if len(self.start) < 3 and b"\xef\xbb\xbf".startswith(self.start):
                return
            data = self.start[3:] if self.start.startswith(b"\xef\xbb\xbf") else self.start
            self.start = b""
            self.at_start = False
        pos = 0
        n = len(data)
        if self.pending_quote and n:
            self.pending_quote = False
            if data[0] == 0x22:
                self._push(b'"')
                pos = 1
            else:
                self.open[2] = False
        while pos < n and not self.stopped:
            if self.open is not None:
                pos = self._cells(data, pos)
                continue
            nl = data.find(b"\n", pos)
            line = data[pos:nl] if nl >= 0 else b""
            quotes = line.count(b'"') if nl >= 0 else 1
            if quotes % 2:  # the record goes on past this line or this piece
                self.open = [[], bytearray(), False, False]
                continue
            if quotes:
                self._quoted_line(line)
            else:
                self._line(line)
            pos = nl + 1

    def finish(self):
        if self.at_start:
            self.at_start = False
            data = b"" if self.start == b"\xef\xbb\xbf" else self.start
            self.start = b""
            if data:
                self.feed(data)
        if self.stopped:
            return
        if self.open is not None:
            self.pending_quote = False
            self._end_record()
        self.stopped = True

    def _line(self, line):
        if b"," not in line and not line.strip(b"\r \t"):
            return
        want = min(self.limit or MAX_CELLS, MAX_CELLS)
        cells = line.split(b",", want)[:want]
        self._deliver([c[:MAX_CELL].strip(_SPACE) for c in cells], min(line.count(b",") + 1, MAX_CELLS))

    def _quoted_line(self, line):
        """A whole record holding an even number of quotes (so it ends at
        this line's end). Split at the quotes, the pieces alternate outside
        and inside; an empty outside piece between two inside ones is the
        escaped quote ""."""
        parts = line.split(b'"')
        last = len(parts) - 1
        ncells = min(line.count(b",") - b"".join(parts[1::2]).count(b",") + 1, MAX_CELLS)
        want = min(self.limit or MAX_CELLS, MAX_CELLS)
        cells = []
        cur = []
        for i, p in enumerate(parts):
            if i % 2:
                cur.append(p)
            elif not p and 0 < i < last:
                cur.append(b'"')
            else:
                pieces = p.split(b",")
                cur.append(pieces[0])
                for q in pieces[1:]:
                    cells.append(b"".join(cur))
                    cur = [q]
                if len(cells) >= want:
                    break
        else:
            cells.append(b"".join(cur))
        self._deliver([c[:MAX_CELL].strip(_SPACE) for c in cells[:want]], ncells)

    def _deliver(self, cells, ncells=None):
        self.ncells = len(cells) if ncells is None else ncells
        if not self.on_record(cells, self.index):
            self.stopped = True
        self.index += 1

    def _push(self, b):
        cell = self.open[1]
        if len(cell) < MAX_CELL:
            cell += b[:MAX_CELL - len(cell)]

    def _end_cell(self):
        o = self.open
        if len(o[0]) < MAX_CELLS:
            o[0].append(bytes(o[1]).strip(_SPACE))
        o[1] = bytearray()

    def _end_record(self):
        self._end_cell()
        o = self.open
        self.open = None
        if o[3]:
            self._deliver(o[0])

    def _cells(self, data, pos):
        """Reads the open record from pos; returns where it stopped (after
        the record's '\\n', or len(data) when the record goes on)."""
        o = self.open
        n = len(data)
        while pos < n:
            if o[2]:  # inside quotes
                q = data.find(b'"', pos)
                if q < 0:
                    self._push(data[pos:])
                    return n
                self._push(data[pos:q])
                if q + 1 == n:
                    self.pending_quote = True
                    return n
                if data[q + 1] == 0x22:
                    self._push(b'"')
                    pos = q + 2
                else:
                    o[2] = False
                    pos = q + 1
                continue
            m = _SPECIAL.search(data, pos)
            end = m.start() if m else n
            if end > pos:
                seg = data[pos:end]
                if seg.strip(b"\r \t"):
                    o[3] = True
                self._push(seg)
                pos = end
            if m is None:
                return n
            c = data[pos]
            pos += 1
            if c == 0x22:
                o[2] = True
                o[3] = True
            elif c == 0x2C:
                self._end_cell()
                o[3] = True
            else:  # '\\n'
                self._end_record()
                return pos
        return n


_SPECIAL = re.compile(b'[,\n"]')
_NOT_QUOTE_NL = bytes(b for b in range(256) if b not in b'"\n')


def _unquote(c):
    """A cell's bytes holding an even number of quotes and no comma inside
    them, as the reader joins them: the quotes dropped, "" inside quotes (an
    empty piece between two quoted ones) kept as one quote."""
    parts = c.split(b'"')
    last = len(parts) - 1
    if last == 2:
        return parts[0] + parts[1] + parts[2]
    out = []
    for i, p in enumerate(parts):
        out.append(b'"' if not p and i % 2 == 0 and 0 < i < last else p)
    return b"".join(out)


def column(header, name):
    low = name.lower()
    for i, h in enumerate(header):
        if len(h) == len(name) and h.lower() == low:
            return i
    return None


# ---- numbers (the rules of parsers/finite_number.h) -------------------------

_NUM = re.compile(rb"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INFNAN = re.compile(rb"-?(?:inf|infinity|nan|nan\([0-9A-Za-z_]*\))\Z", re.I)
NUMBER, NOT_A_NUMBER, OUT_OF_RANGE = 0, 1, 2
_PLAIN = (b"", b".")  # what is left of a plain decimal once its digits are deleted
_NOT_PLAIN = (b"\n", b"-", b"_", b"n", b"N")  # in a number's cell: no '\n', no sign, no NaN nor '_' (_loose)
_ALIKE = b"0." + _SPACE  # what a start time's shape may hold for _window to compare cells as bytes
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _fold(a):
    """A kernel's or type's durations held in a[4] folded into its count,
    sum (in the rows' order) and maximum."""
    ds = a[4]
    if ds:
        a[1] += len(ds)
        a[2] = _sum_in_order(ds, a[2])
        m = max(ds)
        if a[3] < m:
            a[3] = m
        del ds[:]


def _plain(cells):
    """Every cell a plain decimal (digits, at most one dot, a digit in it):
    what float() reads as the rules of parse_number do."""
    return (b"".join(cells).translate(None, b"0123456789.") == b"" and min(map(len, cells)) > 0
            and max(map(bytes.count, cells, repeat(b"."))) <= 1 and b"." not in cells)


if sys.implementation.name == "cpython" and sys.version_info < (3, 12):
    _sum_in_order = sum  # floats added one by one, left to right, in C (3.12 made sum() compensated)
else:
    def _sum_in_order(xs, start):
        """start + xs[0] + xs[1] + ..., in that order (what KernelSummaryBuilder adds)."""
        return functools.reduce(operator.add, xs, start)


def _window(scol, ds, dmax):
    """(the least start, the greatest start + duration) of a piece's start
    time cells (checked as _loose says: no sign nor exponent) and
    durations, or None for a value beyond 2^63 or a cell float() refuses.
    When every cell is written alike (one length, the digits in the same
    places and the same other bytes: the real files' start times, epoch
    microseconds to 3 decimals), their bytes order is their values' order:
    only the least, the greatest and the cells that may end last are
    converted (a start below the greatest start - the greatest duration -
    a margin above the conversions' rounding cannot end last); otherwise
    every cell is converted."""
    s0 = scol[0]
    shape = s0.translate(_DIGITS_AS_ZERO)
    if not shape.translate(None, _ALIKE) and b",".join(scol).translate(_DIGITS_AS_ZERO) == b",".join(
            repeat(shape, len(scol))):
        try:
            first, top = float(min(scol)), float(max(scol))
        except ValueError:
            return None  # not a number (a lone dot): every cell alike
        if top > MAX_MAG:
            return None
        bound = int(math.floor(top - dmax)) - 2 - int(top * 2.0 ** -50)
        lead = shape[:len(shape) - len(shape.lstrip(_SPACE))]
        whole = len(shape) - len(lead) - len(shape[len(lead):].lstrip(b"0"))  # the digits before the point
        if bound > 0 and whole > 0:
            # the cell of that shape whose value is bound: every start below it ends before the last
            low = lead + str(bound).zfill(whole).encode("ascii") + shape[len(lead) + whole:]
            ends = list(compress(range(len(scol)), map(low.__le__, scol)))
            last = max(map(operator.add, map(float, map(scol.__getitem__, ends)), map(ds.__getitem__, ends)))
        else:
            last = max(map(operator.add, map(float, scol), ds))
        return first, last
    try:
        sts = list(map(float, scol))
    except ValueError:
        return None
    if max(sts) > MAX_MAG:
        return None
    return min(sts), max(map(operator.add, sts, ds))


def parse_number(s):
    if s[:1] == b"+":
        s = s[1:]
    if not s:
        return NOT_A_NUMBER, 0.0
    if _NUM.match(s):
        v = float(s)
        if math.isinf(v) or abs(v) > MAX_MAG:
            return OUT_OF_RANGE, 0.0
        if v == 0.0:
            mant = s.split(b"e")[0].split(b"E")[0]
            if mant.strip(b"-.0"):
                return OUT_OF_RANGE, 0.0  # an underflow
        return NUMBER, v
    if _INFNAN.match(s):
        return OUT_OF_RANGE, 0.0
    return NOT_A_NUMBER, 0.0


def r3(v):
    """std::round(v * 1000) / 1000: halves away from zero."""
    y = v * 1000.0
    if math.isinf(y) or math.isnan(y):
        return y / 1000.0
    a = abs(y)
    f = math.floor(a)
    if a - f >= 0.5:
        f += 1
    return math.copysign(float(f), y) / 1000.0


# ---- the kernel summary (parsers/kernel_summary.h is its C++ reference) -----

class SummaryError(Exception):
    pass


class KernelSummary(object):
    def __init__(self, max_distinct=20000, check=False):
        self.max_distinct = max_distinct
        self.check = check
        self.error = None
        self.header = None
        self.rows_re = None     # _rows_pattern, once the header is read
        self.problem = None     # the kernel_details check's (five columns) refusal
        self.data_rows = 0
        self.counted = 0
        self.skipped = 0
        self.other = 0
        self.total = 0.0
        self.first = None
        self.last = None
        self.kernels = {}
        self.types = {}
        self.carry = b""    # feed's incomplete last line
        self.durs = []      # _lines' durations not yet folded in (_flush), in row order
        self.starts = []
        self.ends = []
        self.reader = CsvReader(self._record)

    def _header(self, cells):
        self.header = cells
        missing = [n for n in (b"Name", b"Type", b"Duration(us)") if column(cells, n) is None]
        if self.check:
            kd_missing = [n for n in KD_NEEDED if column(cells, n) is None]
            if kd_missing:
                self.problem = 'kernel_details.csv: missing column%s %s (header: %s)' % (
                    "s" if len(kd_missing) > 1 else "", ", ".join('"%s"' % text(m) for m in kd_missing),
                    truncate_text(b",".join(cells), 400))
                return False
        if missing:
            first = cells[0][:MAX_NAME] if cells else b""
            self.error = "kernel_details.csv: the header lacks %s; it has %d columns (first: %s)" % (
                ", ".join(text(m) for m in missing), len(cells), text(first))
            return False
        self.name_col = column(cells, b"Name")
        self.type_col = column(cells, b"Type")
        self.dur_col = column(cells, b"Duration(us)")
        self.core_col = column(cells, b"Accelerator Core")
        self.start_col = column(cells, b"Start Time(us)")
        self.need = max(self.name_col, self.type_col, self.dur_col) + 1
        self.reader.limit = max(c for c in (self.name_col, self.type_col, self.dur_col, self.core_col,
                                            self.start_col) if c is not None) + 1
        self.rows_re, self.rows_groups = self._rows_pattern()
        self.tight = None    # (pattern, groups) of the quoting the last piece had (_learn_quoting)
        self.tight_of = {}
        self.cells_of = {}   # a line's cells group -> ((name, type), type, core)
        return True

    def _rows_pattern(self, quoted=None):
        """The regular expression _rows takes a piece's lines with and where
        its groups are ((None, None) when the header does not suit it).

        With quoted None, the general pattern: per line, the columns up to
        the last one read with no quote among them but around a start time
        or a duration, the columns from the first to the last of name, type
        and core as one group (their "cells", split per distinct value),
        each start time and duration a plain decimal of at most 18 digits
        before its point and 100 after (so no value underflows nor reaches
        2^63) with at most 64 spaces around it, quoted or bare (a group says
        which), then anything to the line's end.

        With quoted a dict {"s"|"d": bool} (the quoting the last piece had,
        _learn_quoting), the loose pattern _rows tries first: only
        single-byte scans (anything but a comma: the cheapest loop of the
        engine, no character class), each start time and duration a raw
        group of less than 300 bytes (inside its quotes when quoted), the
        unread columns before and after the cells as groups of their own, a
        comma after the last column read (a line that ends there is left to
        the general pattern), the rest of the line a group. It checks
        nothing a column holds; _loose checks the groups in bulk afterwards
        (_loose says what), so that what it takes is what the general
        pattern takes."""
        want = self.reader.limit
        span = [c for c in (self.name_col, self.type_col, self.core_col) if c is not None]
        lo, hi = min(span), max(span)
        nums = {self.dur_col: "d"}
        if self.start_col is not None:
            nums[self.start_col] = "s"
        if any(lo <= c <= hi for c in nums) or want > 512:
            return None, None
        sp = r"[ \t\r\f\v]{0,64}"
        num = r"([0-9]{1,18}(?:\.[0-9]{0,100})?|\.[0-9]{1,100})"
        parts = []
        groups = 0
        where = {"unread": []}
        run = 0  # unread columns waiting for their group (loose pattern)
        for i in range(want):
            unread = not (lo <= i <= hi or i in nums)
            if quoted is not None and run and not unread:
                parts.append(r"(" + r",".join([r"[^,]*"] * run) + r")")
                groups += 1
                where["unread"].append(groups - 1)
                run = 0
            if i == lo:
                cell = r'[^,\n"]*' if quoted is None else r"[^,]*"
                parts.append(r"(" + r",".join([cell] * (hi - lo + 1)) + r")")
                groups += 1
                where["cells"] = groups - 1
            elif lo < i <= hi:
                continue
            elif i in nums:
                if quoted is None:
                    q = "q" + nums[i]
                    parts.append(sp + r'(?P<%s>")?' % q + sp + num + sp + r"(?(%s)\")" % q + sp)
                    groups += 2
                elif quoted[nums[i]]:
                    parts.append(r'"([^,]{0,299})"')
                    groups += 1
                else:
                    parts.append(r"([^,]{0,299})")
                    groups += 1
                where[nums[i]] = groups - 1
            elif quoted is None:
                parts.append(r'[^,\n"]*')
            else:
                run += 1
        if run:
            parts.append(r"(" + r",".join([r"[^,]*"] * run) + r")")
            groups += 1
            where["unread"].append(groups - 1)
        if quoted is None:
            tail = r"(?:,[^\n]*)?\n"
        else:
            tail = r",([^\n]*)\n"  # a comma after the last column read: it cannot be cut short
            where["tail"] = groups
            # the bytes of a line outside the groups: the commas between
            # the parts and before the rest, the quotes around the quoted
            # numbers, the '\n'
            where["fixed"] = len(parts) + 2 * sum(1 for v in quoted.values() if v) + 1
        return re.compile((r"^" + r",".join(parts) + tail).encode("ascii"), re.M), where

    def _learn_quoting(self, cols, g):
        """After the general pattern took a piece: when every row quoted its
        start time (and its duration) alike, the loose pattern of that
        quoting is tried first from the next piece on."""
        quoted = {}
        for k in ("s", "d"):
            if k in g:
                qs = set(cols[g[k] - 1])  # the number's quote group comes right before it
                if len(qs) != 1:
                    return
                quoted[k] = qs.pop() == b'"'
        key = tuple(sorted(quoted.items()))
        if key not in self.tight_of:
            self.tight_of[key] = self._rows_pattern(quoted)
        self.tight = self.tight_of[key]

    def _cells(self, cells):
        """((name, type), type, core) of a cells group, as the reader cuts
        and trims each cell."""
        c = cells.split(b",")
        lo = min(x for x in (self.name_col, self.type_col, self.core_col) if x is not None)
        cut = lambda i: c[i - lo][:MAX_CELL].strip(_SPACE)[:MAX_NAME]
        name, typ = cut(self.name_col), cut(self.type_col)
        core = cut(self.core_col) if self.core_col is not None else b""
        got = ((name, typ), typ, core)
        if len(cells) <= 1024:  # kept for the next pieces: at most 20,000 of at most 1 KiB
            if len(self.cells_of) >= 20000:
                self.cells_of.clear()
            self.cells_of[cells] = got
        return got

    def _loose(self, piece):
        """The piece's rows by the loose pattern (_rows_pattern), checked in
        bulk so that they are the general pattern's rows with the same
        values: (cells, their distinct values, durations, the least start
        or None, the greatest start + duration or None), or None when a
        check fails (the general pattern then takes the piece). Checks:
        - the matches cover the piece (their groups' and fixed bytes add up
          to its size) and no group but the last holds a '\n': so each
          match is one whole line and every line is matched;
        - no quote in the unread columns nor among the cells, and an even
          number in each line's rest (the record ends with its line; the
          quoted numbers' two quotes are the pattern's);
        - in each duration's and start time's column no '\n' (the match's
          one line), no '-' (a negative, an exponent's underflow), no '_'
          nor 'n'/'N' (a NaN): what float() reads otherwise than the rules
          (an infinity is beyond 2^63 below; any other exponent it reads
          as they do); float() of each duration, which refuses an empty
          cell, a lone dot, two dots, an inner space or any other byte;
          the cells being shorter than 300 bytes and unsigned, no value
          underflows and none is cut by the reader (MAX_CELL); none beyond
          2^63. The start times are not all converted (_window)."""
        pattern, g = self.tight
        rows = pattern.findall(piece)
        if not rows:
            return None
        n = len(rows)
        cols = list(zip(*rows))
        size = n * g["fixed"]
        for i in g["unread"]:
            j = b"".join(cols[i])
            if b'"' in j or b"\n" in j:
                return None
            size += len(j)
        cells = cols[g["cells"]]
        j = b"".join(cells)
        if b"\n" in j:
            return None
        size += len(j)
        uniq = set(cells)
        if b'"' in b"".join(uniq):
            return None
        dcol = cols[g["d"]]
        jd = b"".join(dcol)
        if any(map(jd.__contains__, _NOT_PLAIN)):
            return None
        size += len(jd)
        scol = cols[g["s"]] if "s" in g else None
        if scol is not None:
            js = b"".join(scol)
            if any(map(js.__contains__, _NOT_PLAIN)):
                return None
            size += len(js)
        tails = b"\n".join(cols[g["tail"]])
        if size + len(tails) + 1 - n != len(piece):
            return None  # a line outside the pattern (or a group across lines)
        if b'"' in tails and b'"' in tails.translate(None, _NOT_QUOTE_NL).replace(b'""""', b"").replace(b'""', b""):
            return None  # a line of odd quotes (each line's quotes a run): its record goes on past it
        try:
            ds = list(map(float, dcol))
        except ValueError:
            return None
        dmax = max(ds)
        if dmax > MAX_MAG:
            return None
        if scol is None:
            return cells, uniq, ds, None, None
        window = _window(scol, ds, dmax)
        if window is None:
            return None
        return (cells, uniq, ds) + window

    def _rows(self, piece):
        """The data records of a piece of whole lines taken by one findall:
        first by the loose pattern of the quoting the last piece had
        (_learn_quoting, _loose), else by rows_re; only the columns read
        come out, the names, types and cores once per distinct line prefix.
        False, having changed nothing, when a line is outside it (or a
        line's quotes are odd, or more new kernels than there is room for):
        the other paths take the piece."""
        if self.rows_re is None:
            return False
        got = self._loose(piece) if self.tight is not None else None
        if got is not None:
            cells, uniq, ds, first, last = got
        else:
            if b'"' in piece:
                quotes = piece.translate(None, _NOT_QUOTE_NL)  # each line's quotes, then its '\n'
                if b'"' in quotes.replace(b'""', b""):
                    return False  # a line of odd quotes: its record goes on past it
                lines = quotes.count(b"\n")
            else:
                lines = piece.count(b"\n")
            rows = self.rows_re.findall(piece)
            g = self.rows_groups
            if len(rows) != lines or not rows:
                return False
            cols = list(zip(*rows))
            cells = cols[g["cells"]]
            uniq = set(cells)
            self._learn_quoting(cols, g)
            ds = list(map(float, cols[g["d"]]))
            first = last = None
            if "s" in g:
                sts = list(map(float, cols[g["s"]]))
                first = min(sts)
                last = max(map(operator.add, sts, ds))
        n = len(ds)
        kernels = self.kernels
        types = self.types
        of = self.cells_of
        infos = [of.get(c) or self._cells(c) for c in uniq]
        keys = {i[0] for i in infos}
        new = keys.difference(kernels)
        if new and len(kernels) + len(new) > self.max_distinct:
            return False  # the kernels past the limit: _lines counts them row by row
        for key, typ, core in infos:
            k = kernels.get(key)
            if k is None:
                kernels[key] = [core, 0, 0.0, 0.0, []]
            elif k[0] != core:
                k[0] = b"mixed"
            t = types.get(typ)
            if t is None:
                types[typ] = [core, 0, 0.0, 0.0, []]
            elif t[0] != core:
                t[0] = b"mixed"
        # Each row's duration appended to its kernel's and its type's list
        # in the rows' order, then folded (the same additions as _add's).
        kl = {c: kernels[i[0]][4] for c, i in zip(uniq, infos)}
        tl = {c: types[i[1]][4] for c, i in zip(uniq, infos)}
        collections.deque(map(list.append, map(kl.__getitem__, cells), ds), 0)
        collections.deque(map(list.append, map(tl.__getitem__, cells), ds), 0)
        for key in keys:
            _fold(kernels[key])
        for typ in {i[1] for i in infos}:
            _fold(types[typ])
        self.total = _sum_in_order(ds, self.total)
        if first is not None:
            if self.first is None or first < self.first:
                self.first = first
            if self.last is None or last > self.last:
                self.last = last
        self.reader.index += n
        self.data_rows += n
        self.counted += n
        return True

    def _record(self, cells, index):
        if index == 0:
            return self._header(cells)
        self.data_rows += 1
        ncells = self.reader.ncells  # cells holds the first reader.limit of them
        if ncells < self.need:
            self.skipped += 1
            return True
        kind, d = parse_number(cells[self.dur_col])
        if kind == OUT_OF_RANGE:
            self.error = "kernel_details.csv data row %d: Duration(us) is out of range (%s)" % (
                self.data_rows, text(cells[self.dur_col][:MAX_NAME]))
            return False
        if kind != NUMBER or d < 0:
            self.skipped += 1
            return True
        core = cells[self.core_col][:MAX_NAME] if self.core_col is not None and self.core_col < ncells else b""
        typ = cells[self.type_col][:MAX_NAME]
        key = (cells[self.name_col][:MAX_NAME], typ)
        k = self.kernels.get(key)
        if k is None:
            if len(self.kernels) >= self.max_distinct:
                key = (OTHER, b"")
                self.other += 1
            k = self.kernels.get(key)
            if k is None:
                k = self.kernels[key] = [core, 0, 0.0, 0.0, []]
        self._flush()
        self._add(k, core, d)
        t = self.types.get(typ)
        if t is None:
            t = self.types[typ] = [core, 0, 0.0, 0.0, []]
        self._add(t, core, d)
        self.counted += 1
        self.total += d
        if self.start_col is not None and self.start_col < ncells:
            skind, st = parse_number(cells[self.start_col])
            if skind == NUMBER and st >= 0:
                if self.first is None or st < self.first:
                    self.first = st
                end = st + d
                if self.last is None or end > self.last:
                    self.last = end
        return True

    @staticmethod
    def _add(a, core, us):
        if a[1] == 0:
            a[0] = core
        elif a[0] != core:
            a[0] = b"mixed"
        a[1] += 1
        a[2] += us
        if a[3] < us:
            a[3] = us

    def _idle(self):
        """True when the next byte starts a record after the header: the
        fast path may take whole lines."""
        r = self.reader
        return (self.header is not None and r.open is None and not r.pending_quote and not r.at_start
                and not r.stopped)

    def feed(self, data):
        """Whole lines go to _lines while the reader is idle; the header, a
        record that spans lines and what follows it up to its end go to the
        reader line by line; an incomplete last line waits in carry."""
        if self.error is not None or self.problem is not None or self.reader.stopped:
            return
        buf = self.carry + data if self.carry else data
        self.carry = b""
        pos = 0
        n = len(buf)
        while pos < n and not self.reader.stopped:
            if self._idle():
                last = buf.rfind(b"\n", pos)
                if last < 0:
                    self.carry = buf[pos:]
                    return
                if self._rows(buf[pos:last + 1]):
                    pos = last + 1
                    continue
                lines = buf[pos:last].split(b"\n")
                if self._columns(lines):
                    pos = last + 1
                    continue
                done = self._lines(lines)
                if done == len(lines):
                    pos = last + 1
                    continue
                for line in lines[:done]:  # a record going on past its line: the reader takes it
                    pos += len(line) + 1
            nl = buf.find(b"\n", pos)
            end = n if nl < 0 else nl + 1
            self.reader.feed(buf[pos:end])
            pos = end

    def _columns(self, lines):
        """The data records of whole lines taken column by column, each step
        one call over every line (no Python per cell): when every line has
        an even number of quotes, at least the columns read, no quote in an
        unread one among them, read cells that are bare or one quoted span
        ("123.456\t", the real start time), plain decimals for the
        durations and start times, names and types within MAX_NAME, and
        room for the piece's new kernels. Returns False, having changed
        nothing, when a line is outside that; _lines then takes the piece
        with the same rules row by row."""
        r = self.reader
        want = min(r.limit or MAX_CELLS, MAX_CELLS)
        n = len(lines)
        if not n or max(map(len, lines)) > MAX_CELL or any(map(operator.and_, map(bytes.count, lines, repeat(b'"')), repeat(1))):
            return False
        rows = list(map(bytes.split, lines, repeat(b","), repeat(want)))
        if min(map(len, rows)) < want:
            return False
        cols = list(zip(*rows))
        cc = self.core_col if self.core_col is not None else -1
        sc = self.start_col if self.start_col is not None else -1
        read = {self.name_col, self.type_col, self.dur_col, cc, sc}
        cells = {}
        for i in range(want):
            col = cols[i]
            if b'"' not in b"".join(col):
                if i in read:
                    cells[i] = list(map(bytes.strip, col, repeat(_SPACE)))
                continue
            if i not in read:
                return False
            col = list(map(bytes.strip, col, repeat(_SPACE)))
            if (b"".join(col).count(b'"') != 2 * n or min(map(len, col)) < 2
                    or not all(map(bytes.startswith, col, repeat(b'"')))
                    or not all(map(bytes.endswith, col, repeat(b'"')))):
                return False  # quotes other than one whole quoted span per cell
            cells[i] = list(map(bytes.strip, map(operator.getitem, col, repeat(slice(1, -1))), repeat(_SPACE)))
        names, types_, durs_ = cells[self.name_col], cells[self.type_col], cells[self.dur_col]
        if max(map(len, names)) > MAX_NAME or max(map(len, types_)) > MAX_NAME or not _plain(durs_):
            return False
        cores = cells[cc] if cc >= 0 else [b""] * n
        if cc >= 0 and max(map(len, cores)) > MAX_NAME:
            return False
        ds = list(map(float, durs_))
        if max(ds) > MAX_MAG:
            return False  # out of range: _lines says so at its row
        if 0.0 in ds and any(s.strip(b".0") for s, d in zip(durs_, ds) if d == 0.0):
            return False  # an underflow: _lines refuses it
        sts = None
        if sc >= 0:
            starts = cells[sc]
            if not _plain(starts) or max(map(len, starts)) >= 300:
                return False
            sts = list(map(float, starts))
            if max(sts) > MAX_MAG:
                return False
        keys = list(zip(names, types_))
        kernels = self.kernels
        types = self.types
        uniq = set(keys)
        new = uniq.difference(kernels)
        if new:
            if len(kernels) + len(new) > self.max_distinct:
                return False  # the kernels past the limit: _lines counts them row by row
            first = dict(zip(reversed(keys), reversed(cores)))  # a key's first row's core
            for key in new:
                kernels[key] = [first[key], 0, 0.0, 0.0, []]
        for typ, core in dict(zip(reversed(types_), reversed(cores))).items():
            if typ not in types:
                types[typ] = [core, 0, 0.0, 0.0, []]
        for key, core in set(zip(keys, cores)):
            k = kernels[key]
            if k[0] != core:
                k[0] = b"mixed"
        for typ, core in set(zip(types_, cores)):
            t = types[typ]
            if t[0] != core:
                t[0] = b"mixed"
        # Only the piece's own kernels and types are touched and folded (a
        # piece is small; the summary may hold thousands of kernels).
        kd = {key: kernels[key][4] for key in uniq}
        td = {typ: types[typ][4] for typ in set(types_)}
        collections.deque(map(list.append, map(kd.__getitem__, keys), ds), 0)
        collections.deque(map(list.append, map(td.__getitem__, types_), ds), 0)
        for key in kd:
            _fold(kernels[key])
        for typ in td:
            _fold(types[typ])
        self.total = _sum_in_order(ds, self.total)
        if sts is not None:
            m = min(sts)
            if self.first is None or m < self.first:
                self.first = m
            m = max(map(operator.add, sts, ds))
            if self.last is None or m > self.last:
                self.last = m
        r.index += n
        self.data_rows += n
        self.counted += n
        return True

    def _lines(self, lines):
        """The data records of whole lines (no '\\n' in them), summarised
        here with the reader's rules. Returns how many lines it took: it
        stops before a line whose quotes are odd (its record goes on past
        it) or when a record is refused. A line whose quotes fall among the
        columns read in another way than whole quoted cells goes to the
        reader's own split."""
        r = self.reader
        want = min(r.limit or MAX_CELLS, MAX_CELLS)
        need = self.need
        nc, tc, dc = self.name_col, self.type_col, self.dur_col
        cc = self.core_col if self.core_col is not None else -1
        sc = self.start_col if self.start_col is not None else -1
        cols = tuple(sorted({nc, tc, dc} | ({cc} if cc >= 0 else set()) | ({sc} if sc >= 0 else set())))
        kernels = self.kernels
        types = self.types
        durs = self.durs
        starts = self.starts
        ends = self.ends
        max_distinct = self.max_distinct
        sp = _SPACE
        taken = 0
        rows = 0
        for line in lines:
            if b'"' in line:
                cells = line.split(b",", want)
                if len(cells) > want:
                    rest = cells[want]
                    plen = len(line) - len(rest) - 1
                    q = line.count(b'"', 0, plen)  # the quotes among the cells read
                    if (q + rest.count(b'"')) & 1:
                        break
                else:
                    plen = len(line)
                    q = line.count(b'"')
                    if q & 1:
                        break
                if q == 2:  # one quoted span: without a comma in it, its quotes just go
                    a, b, c = line[:plen].split(b'"')
                    if b"," not in b:
                        q = 0
                        cells[:want] = (a + b + c).split(b",")
                if q:
                    for i in cols:
                        if i < len(cells):
                            c = cells[i]
                            if b'"' in c:
                                k = c.count(b'"')
                                if k & 1:
                                    break
                                q -= k
                                cells[i] = _unquote(c)
                    if q:  # quotes in a column not read, or an odd quote in one read: the reader splits it
                        self.data_rows += rows
                        self.counted += rows
                        rows = 0
                        self._flush()
                        r._quoted_line(line)
                        taken += 1
                        if r.stopped:
                            return taken
                        continue
            else:
                cells = line.split(b",", want)
                if len(cells) == 1 and not line.strip(b"\r \t"):
                    taken += 1
                    continue  # a blank record
            taken += 1
            r.index += 1
            long = len(line) > MAX_CELL  # a cell may need cutting at MAX_CELL
            ncells = len(cells)  # the record's own count when at most want; more than want otherwise
            if ncells > MAX_CELLS:
                ncells = MAX_CELLS
            if ncells < need:
                self.data_rows += 1
                self.skipped += 1
                continue
            s = cells[dc]
            if long:
                s = s[:MAX_CELL]
            s = s.strip(sp)
            if s and s.translate(None, b"0123456789") in _PLAIN and s != b".":
                d = float(s)
                kind = NUMBER
                if d == 0.0 or d > MAX_MAG:
                    kind, d = parse_number(s)
            else:
                kind, d = parse_number(s)
            if kind != NUMBER or d < 0:
                self.data_rows += rows + 1
                self.counted += rows
                rows = 0
                if kind == OUT_OF_RANGE:
                    self._flush()
                    self.error = "kernel_details.csv data row %d: Duration(us) is out of range (%s)" % (
                        self.data_rows, text(s[:MAX_NAME]))
                    r.stopped = True
                    return taken
                self.skipped += 1
                continue
            name = cells[nc]
            if long:
                name = name[:MAX_CELL]
            name = name.strip(sp)[:MAX_NAME]
            typ = cells[tc]
            if long:
                typ = typ[:MAX_CELL]
            typ = typ.strip(sp)[:MAX_NAME]
            if 0 <= cc < ncells:
                core = cells[cc]
                if long:
                    core = core[:MAX_CELL]
                core = core.strip(sp)[:MAX_NAME]
            else:
                core = b""
            key = (name, typ)
            k = kernels.get(key)
            if k is None:
                if len(kernels) >= max_distinct:
                    key = (OTHER, b"")
                    self.other += 1
                k = kernels.get(key)
                if k is None:
                    k = kernels[key] = [core, 0, 0.0, 0.0, []]
            if k[0] != core:
                k[0] = b"mixed"
            k[4].append(d)
            t = types.get(typ)
            if t is None:
                t = types[typ] = [core, 0, 0.0, 0.0, []]
            if t[0] != core:
                t[0] = b"mixed"
            t[4].append(d)
            durs.append(d)
            rows += 1
            if 0 <= sc < ncells:
                s = cells[sc]
                if long:
                    s = s[:MAX_CELL]
                s = s.strip(sp)
                if s.translate(None, b"0123456789") in _PLAIN and s != b"." and 0 < len(s) < 300:
                    st = float(s)  # no underflow nor overflow below 300 digits
                    if st <= MAX_MAG:
                        starts.append(st)
                        ends.append(st + d)
                else:
                    skind, st = parse_number(s)
                    if skind == NUMBER and st >= 0:
                        starts.append(st)
                        ends.append(st + d)
        self.data_rows += rows
        self.counted += rows
        self._flush()
        return taken

    def _flush(self):
        """Folds the durations _lines collected into the sums, counts and
        maxima, in the rows' order (the same additions as _add's)."""
        if not self.durs and not self.starts:
            return
        for group in (self.kernels, self.types):
            for a in group.values():
                ds = a[4]
                if ds:
                    a[1] += len(ds)
                    a[2] = _sum_in_order(ds, a[2])
                    m = max(ds)
                    if a[3] < m:
                        a[3] = m
                    del ds[:]
        if self.durs:
            self.total = _sum_in_order(self.durs, self.total)
            del self.durs[:]  # emptied in place: _lines holds these lists
        if self.starts:
            m = min(self.starts)
            if self.first is None or m < self.first:
                self.first = m
            m = max(self.ends)
            if self.last is None or m > self.last:
                self.last = m
            del self.starts[:]
            del self.ends[:]

    def finish(self):
        """The summary as KernelSummaryJson writes it; SummaryError on a refusal."""
        if self.error is None and self.problem is None:
            if self.carry:
                self.reader.feed(self.carry)
                self.carry = b""
            self.reader.finish()
        self._flush()
        if self.problem is not None:
            raise SummaryError(self.problem)
        if self.error is not None:
            raise SummaryError(self.error)
        if self.reader.index == 0:
            raise SummaryError("kernel_details.csv is empty: no header line")
        order = lambda e: (-e[3][2], e[0], e[1])  # total desc, then name, then type
        top = sorted(((n, t, None, a) for (n, t), a in self.kernels.items()), key=order)[:TOP_N]
        types = sorted(((b"", t, None, a) for t, a in self.types.items()), key=order)[:MAX_TYPES]
        total = self.total

        def stat(e, with_name):
            a = e[3]
            j = {}
            if with_name:
                j["name"] = text(e[0])
            j["type"] = text(e[1])
            j["core"] = text(a[0])
            j["count"] = a[1]
            j["total_us"] = r3(a[2])
            j["mean_us"] = r3(a[2] / float(a[1]) if a[1] else 0.0)
            j["max_us"] = r3(a[3])
            j["share_pct"] = r3(a[2] / total * 100.0) if total > 0 else None
            return j
        out = {"data_rows": self.data_rows, "counted_rows": self.counted, "skipped_rows": self.skipped,
               "other_rows": self.other, "distinct_kernels": len(self.kernels), "total_us": r3(total),
               "top": [stat(e, True) for e in top], "by_type": [stat(e, False) for e in types]}
        if self.first is not None and self.last is not None:
            out["first_start_us"] = self.first
            out["last_end_us"] = self.last
        return out


def summarise_file(path, max_distinct=20000, check=False):
    """(summary or None, error or None, bytes read, header cells or None)."""
    ks = KernelSummary(max_distinct, check)
    read = 0
    with open(path, "rb") as f:
        while True:
            data = f.read(CHUNK)
            if not data:
                break
            read += len(data)
            ks.feed(data)
            if ks.error is not None or ks.problem is not None:
                break
    try:
        return ks.finish(), None, read, ks.header
    except SummaryError as e:
        return None, str(e), read, ks.header


# ---- trace_view.json: streamed validation ----------------------------------

class TraceError(Exception):
    pass


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _finite(text):
    v = float(text)
    if math.isinf(v):
        raise ValueError("number overflow parsing '%s'" % text[:40])
    return v


BATCH_MIN = 16 * 1024
# trace_view.json's reads: smaller than the CSV's, as a run's text is copied a few
# times (shaped).
TRACE_CHUNK = 32 << 10
_NEXT_EVENT = re.compile(r"[ \t\n\r]*,[ \t\n\r]*\{")
# The shapes of events (TraceChecker.shaped): every ASCII digit read as 1.
_DIGITS_AS_ONE = bytes.maketrans(b"0123456789", b"1111111111")
# A 0 after a character that is no digit nor '.', followed by a digit: where
# a number could start with a leading zero ("01", "-01"; also "1e05" and
# text in strings, which only sends the run to the exact check). Its literal
# comes first so the search skips to the zeros.
_LEADING_ZERO = re.compile(rb"0(?<=[^0-9.]0)[0-9]")
MAX_SHAPE_BYTES = 8 << 20  # the shapes kept, at most


class TraceChecker(object):
    """Valid JSON whose top level is an array of events or an object with a
    "traceEvents" array; counts the array's elements (and those that are no
    object) without holding more than one element at a time."""

    def __init__(self, f):
        self.f = f
        self.dec = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.base = 0   # characters dropped before buf
        self.eof = False
        self.json = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
        self.no_batch_until = 0  # (absolute) where a batch that failed ended: elements one by one up to it
        self.shapes = set()      # event shapes known to be whole valid objects (shaped)
        self.shape_bytes = 0
        self.novel = 0           # runs in a row whose shapes were mostly new (8: shapes no longer tried)
        self.unsafe = False
        self.shape_json = json.JSONDecoder(parse_constant=_no_constant, parse_float=self._shape_float)
        self.events = 0
        self.non_objects = 0
        self.saw_events = False
        self.bare_array = False

    def more(self):
        if self.eof:
            return False
        data = self.f.read(TRACE_CHUNK)
        try:
            s = self.dec.decode(data, final=not data)
        except UnicodeDecodeError:
            raise TraceError("trace_view.json is not valid UTF-8 (near character %d)" % (self.base + len(self.buf)))
        if not data:
            self.eof = True
        if self.pos > 0:
            self.base += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += s
        return True

    def ws(self):
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in " \t\n\r":
                self.pos += 1
            if self.pos < n or not self.more():
                return

    def peek(self):
        self.ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def fail(self, what):
        raise TraceError("trace_view.json is not valid JSON (character %d): %s" % (self.base + self.pos, what))

    def value(self):
        """One whole JSON value at pos (read on until it is complete)."""
        self.ws()
        while True:
            try:
                v, end = self.json.raw_decode(self.buf, self.pos)
                if end < len(self.buf) or self.eof:
                    self.pos = end
                    return v
            except ValueError as e:
                if self.eof:
                    self.fail(str(e))
            except RecursionError:
                self.fail("nested too deep")
            if len(self.buf) - self.pos > MAX_JSON_VALUE:
                self.fail("a value longer than %d characters" % MAX_JSON_VALUE)
            self.more()

    def batch(self):
        """The events from pos up to an event's end near the buffer's end
        (a '}' followed by ',' and '{'), decoded at once as one array;
        True when it took them. The cut is sound whatever it lands in: the
        piece decodes as "[piece]" only when it is whole elements of the
        event array. A piece that does not decode (a cut inside a string or
        a nested array, or an error) is read element by element up to its
        cut, where the error, if any, is named as before."""
        start = self.pos
        end = len(self.buf)
        if end - start < BATCH_MIN or self.base + start < self.no_batch_until:
            return False
        c = end
        for _ in range(64):
            c = self.buf.rfind("}", start, c)
            if c < 0:
                break
            if _NEXT_EVENT.match(self.buf, c + 1):
                break
        m = _NEXT_EVENT.match(self.buf, c + 1) if c >= 0 else None
        if m is None:
            self.no_batch_until = self.base + end  # no cut here: one element at a time up to what is read
            return False
        if self.novel < 8 and self.shaped(start, c, m.group()):
            self.pos = c + 1
            return True
        try:
            v = self.json.decode("[" + self.buf[start:c + 1] + "]")
        except (ValueError, RecursionError):
            self.no_batch_until = self.base + c + 1
            return False
        self.events += len(v)
        self.non_objects += len(v) - sum(map(isinstance, v, repeat(dict)))
        self.pos = c + 1
        return True

    def _shape_float(self, text):
        # A fraction or exponent in a shape: without an exponent and under
        # 309 characters no value overflows, whatever its digits.
        if "e" in text or "E" in text or len(text) >= 309:
            self.unsafe = True
        return 0.0

    def shaped(self, start, c, sep):
        """The events from start to c (a '}' followed by sep, up to the next
        '{') taken by their shapes: ASCII, no number that could start with a
        leading zero, cut at "}" + sep + "{" into events each of which, with
        every digit read as 1, is an object already seen valid (or checked
        now, the C scanner's rules, refusing exponents: only digits' values
        differ between an event and its shape, and with no leading zero and
        no exponent they change no verdict). Whole valid objects joined by
        the array's separator are a valid run of that many elements. False,
        having changed nothing, when any event is outside that: the run is
        decoded as before (which names an error)."""
        buf = self.buf
        while buf[start] in " \t\n\r":
            start += 1
        if buf[start] != "{":
            return False
        piece = buf[start:c + 1]
        if not piece.isascii():
            return False
        raw = piece.encode("ascii")
        if _LEADING_ZERO.search(raw):
            return False
        events = raw.translate(_DIGITS_AS_ONE)[1:-1].split(("}" + sep).encode("ascii"))
        new = set(events).difference(self.shapes)
        if new:
            if 2 * len(new) > len(events):
                self.novel += 1  # mostly new shapes: decoding the run is cheaper
                return False
            for shape in new:
                self.unsafe = False
                try:
                    v = self.shape_json.decode("{" + shape.decode("ascii") + "}")
                except (ValueError, RecursionError):
                    return False
                if self.unsafe or not isinstance(v, dict):
                    return False
            if self.shape_bytes < MAX_SHAPE_BYTES:
                self.shapes.update(new)
                self.shape_bytes += sum(map(len, new))
        self.novel = 0
        self.events += len(events)
        return True

    def events_array(self):
        self.saw_events = True
        self.pos += 1  # '['
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            if not self.batch():
                v = self.value()
                self.events += 1
                if not isinstance(v, dict):
                    self.non_objects += 1
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == "]":
                self.pos += 1
                return
            else:
                self.fail("expected ',' or ']' in the event array")

    def run(self):
        c = self.peek()
        if c == "\ufeff" and self.base + self.pos == 0:
            self.pos += 1
            c = self.peek()
        if c == "[":
            self.bare_array = True
            self.events_array()
        elif c == "{":
            self.pos += 1
            if self.peek() == "}":
                self.pos += 1
            else:
                while True:
                    if self.peek() != '"':
                        self.fail("expected a key")
                    key = self.value()
                    if self.peek() != ":":
                        self.fail("expected ':'")
                    self.pos += 1
                    if key == "traceEvents" and self.peek() == "[":
                        self.events_array()
                    else:
                        self.value()
                    c = self.peek()
                    if c == ",":
                        self.pos += 1
                    elif c == "}":
                        self.pos += 1
                        break
                    else:
                        self.fail("expected ',' or '}'")
        elif c == "":
            self.fail("no value")
        else:
            self.value()
        if self.peek() != "":
            self.fail("data after the top-level value")
        if not self.saw_events:
            raise TraceError('trace_view.json is neither a JSON array of events nor an object with a '
                             '"traceEvents" array')


def check_trace(path):
    rec = {}
    with open(path, "rb") as f:
        t = TraceChecker(f)
        try:
            t.run()
            rec["valid"] = True
            rec["event_count"] = t.events
        except TraceError as e:
            rec["valid"] = False
            rec["problem"] = str(e)
    return rec


# ---- the rank ----------------------------------------------------------------

def file_record(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return {"exists": True, "size": st.st_size}


def kernel_details(path):
    rec = file_record(path)
    if rec is None:
        return {"exists": False}
    try:
        summary, error, read, header = summarise_file(path, check=True)
    except OSError as e:
        rec["problem"] = "cannot read: %s" % e.strerror
        rec["valid"] = False
        return rec
    rec["bytes_read"] = read
    if header is None:
        rec["valid"] = False
        rec["problem"] = "kernel_details.csv is empty: no header line"
        return rec
    if error is not None and error.startswith("kernel_details.csv: missing column"):
        rec["valid"] = False
        rec["problem"] = error
        return rec
    rec["valid"] = True
    rec["columns"] = len(header)
    if summary is not None:
        rec["data_rows_checked"] = summary["data_rows"]
        rec["summary"] = summary
    else:
        rec["summary_error"] = error
    return rec


def trace_view(path):
    rec = file_record(path)
    if rec is None:
        return {"exists": False}
    try:
        rec.update(check_trace(path))
    except OSError as e:
        rec["valid"] = False
        rec["problem"] = "cannot read: %s" % e.strerror
    return rec


def device_of(d):
    device = None
    try:
        top = sorted(os.listdir(d))
    except OSError:
        return None
    for e in top:
        p = os.path.join(d, e)
        if not e.startswith("PROF_") or os.path.islink(p) or not os.path.isdir(p):
            continue
        try:
            subs = os.listdir(p)
        except OSError:
            continue
        for s in subs:
            q = os.path.join(p, s)
            digits = s[7:]
            if not s.startswith("device_") or os.path.islink(q) or not os.path.isdir(q):
                continue
            if not digits or len(digits) > 6 or not all("0" <= ch <= "9" for ch in digits):
                continue
            n = int(digits)
            if device is not None and device != n:
                return None
            device = n
    return device


def log_record(path):
    """The log's size and its head and tail (LOG_PART bytes each; the whole
    log when it is no longer than both), bytes as latin-1 code points."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(0)
            if size <= 2 * LOG_PART:
                return {"size": size, "head": f.read(2 * LOG_PART).decode("latin-1")}
            head = f.read(LOG_PART)
            f.seek(size - LOG_PART)
            tail = f.read(LOG_PART)
            return {"size": size, "head": head.decode("latin-1"), "tail": tail.decode("latin-1")}
    except OSError:
        return None


def alive(marker):
    try:
        with open(marker + ".pid", "rb") as f:
            pid = int(f.read().strip() or b"0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it exists
    return True


def read_rc(marker):
    try:
        with open(marker + ".rc", "rb") as f:
            data = f.read(64).strip()
    except OSError:
        return None
    try:
        return int(data)
    except ValueError:
        return -1000


def start_in_child(fn, path):
    """fn(path) computed in a forked child, its record (a JSON object) sent
    back over a pipe; None when no child could be started (finish_in_child
    then computes it here)."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:
        code = 1
        try:
            os.close(r)
            data = json.dumps(fn(path), ensure_ascii=True, allow_nan=False).encode("ascii")
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:
            pass
        os._exit(code)  # no atexit, no stdio flush: the parent owns stdout
    os.close(w)
    return pid, r


def finish_in_child(child, fn, path):
    """The child's record of fn(path); computed here when the child could
    not start, died, or sent something that is not one JSON object."""
    if child is None:
        return fn(path)
    pid, r = child
    parts = []
    try:
        with os.fdopen(r, "rb") as f:
            while True:
                b = f.read(CHUNK)
                if not b:
                    break
                parts.append(b)
    except OSError:
        parts = None
    try:
        _, status = os.waitpid(pid, 0)
    except OSError:
        status = -1
    if parts is not None and status == 0:
        try:
            rec = json.loads(b"".join(parts).decode("ascii"))
            if isinstance(rec, dict):
                return rec
        except ValueError:
            pass
    return fn(path)


def digest(d, marker, budget_ms, final, launch):
    out = {"v": 1}
    if launch:
        p = subprocess.run(["sh", "-c", launch, "npuprof-analyse", d, marker], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            out["launch_exit"] = p.returncode
            out["launch_stderr"] = text(p.stderr[-4096:])
            return out
        out["launch"] = text(p.stdout.strip()[:64])
    start = time.monotonic()
    deadline = start + budget_ms / 1000.0
    pause = 0.01
    polls = 0
    rc = None
    is_alive = True
    while True:
        polls += 1
        rc = read_rc(marker)
        if rc is not None:
            break
        is_alive = alive(marker)
        if not is_alive:
            rc = read_rc(marker)  # it may have ended between the two looks
            break
        now = time.monotonic()
        if now >= deadline:
            break
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 0.1)  # at most 0.1 s late: a poll is two file looks
    out["polls"] = polls
    out["waited_ms"] = int((time.monotonic() - start) * 1000)
    out["finished"] = rc is not None
    out["alive"] = rc is None and is_alive
    if rc is not None:
        out["exit_code"] = rc
    if rc is None and is_alive and not final:
        return out
    log = log_record(marker + ".log")
    if log is not None:
        out["log"] = log
    base = os.path.join(d, "ASCEND_PROFILER_OUTPUT")
    # The two files are read at once: trace_view.json's check in a child
    # process beside the CSV's summary here (each is one core's work).
    child = start_in_child(trace_view, os.path.join(base, "trace_view.json"))
    out["kernel_details"] = kernel_details(os.path.join(base, "kernel_details.csv"))
    out["trace_view"] = finish_in_child(child, trace_view, os.path.join(base, "trace_view.json"))
    dev = device_of(d)
    if dev is not None:
        out["device_id"] = dev
    return out


def keep_freed_memory():
    """glibc: freed memory stays in the process's heap (no trim of its top,
    no mmap below 4 MiB). The pieces' objects are allocated and freed over
    and over; a heap top given back and grown again, or a piece mmapped,
    faults every page anew (in the forked child too: 0.1-0.3 s of system
    time per rank). Elsewhere (no ctypes, another libc) nothing changes."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 4 << 20)   # M_MMAP_THRESHOLD
    except Exception:
        pass


def main(argv):
    keep_freed_memory()
    if len(argv) >= 2 and argv[0] in ("summary", "trace"):
        # The differential tests: one JSON line per file.
        for path in argv[2 if argv[0] == "summary" else 1:]:
            if argv[0] == "summary":
                summary, error, _, _ = summarise_file(path, int(argv[1]))
                out = summary if error is None else {"error": error}
            else:
                out = check_trace(path)
            sys.stdout.write(json.dumps(out, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n")
        return 0
    if len(argv) == 6 and argv[0] == "digest":
        out = digest(argv[1], argv[2], int(argv[3]), argv[4] == "1", argv[5])
        sys.stdout.write(json.dumps(out, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n")
        return 0
    sys.stderr.write("usage: rank_digest.py digest DIR MARKER BUDGET_MS FINAL LAUNCH_SCRIPT\n"
                     "       rank_digest.py summary MAX_DISTINCT FILE... | trace FILE...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
