"""user_matrix.py: its reading of `morpheus user-run`'s output (the numbers
the table is made of), on an output as user-run prints it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import user_matrix  # noqa: E402

OUTPUT = """\
user-run: /src/nf/nat/user/nat_user.c, 2 inside prefixes (lpm_dir24), ...
user-run: specialized in 72.1 ms (passes and O2) + 52.0 ms (JIT)
  specialized:
    nat_config: constant-key-lookup
user-run: fast paths in 77.0 ms + 56.5 ms (JIT)
  site 11 (nat_out): 8 hot keys, period 8: 8 hot keys, 86% of the samples
generic         16.70 Mpps     59.9 ns/packet
specialized     15.85 Mpps     63.1 ns/packet  -5.1 %
fast paths      27.01 Mpps     37.0 ns/packet  +61.7 %
oracle          17.00 Mpps     58.8 ns/packet  +1.8 %
(median of 3 interleaved rounds of 3 replays of the trace, burst 32, one thread, its CPU time)
explore (greedy search, 5 dimensions, 3 windows of 3 replays per trial):
  tried  burst=32                                                16.50 Mpps     60.6 ns/packet
  chosen burst=16 specialized=1                                  17.98 Mpps  +9.0 % over the generic handler (dir24, burst 32)
"""


def test_parse_reads_every_version_cycle_and_the_choice():
    result = user_matrix.parse(OUTPUT)
    assert result["versions"] == {"generic": (16.70, 59.9), "specialized": (15.85, 63.1),
                                  "fast paths": (27.01, 37.0), "oracle": (17.00, 58.8)}
    assert result["cycles"] == {"specialized": (72.1, 52.0), "fast paths": (77.0, 56.5)}
    assert result["chosen"] == ("burst=16 specialized=1", 17.98, 9.0)


def test_row_puts_ratios_against_the_generic_handler():
    line = user_matrix.row("nat", "dir24", "high", user_matrix.parse(OUTPUT))
    assert line.startswith("| nat | dir24 | high | 16.70 (59.9) | 15.85 (63.1) -5.1 % | "
                           "27.01 (37.0) +61.7 % | 17.00 (58.8) +1.8 % | burst=16 specialized=1 | "
                           "17.98 +9.0 % | 72.1 + 52.0 / 77.0 + 56.5 |")


def test_a_missing_version_is_a_dash():
    result = user_matrix.parse("\n".join(l for l in OUTPUT.splitlines() if "oracle" not in l))
    assert "| – |" in user_matrix.row("nat", "dir24", "high", result)
