"""`msir-lineage`: the model-lineage page of every run under a folder.

    msir-lineage runs/                 # writes runs/lineage.html
    msir-lineage runs/ -o lineage.html

The page is `msir.viz.lineage`'s (one self-contained HTML file that opens
from disk); a folder without runs, or a summary file that cannot be read, is
one `msir-lineage: error:` line and exit status 1.
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    from msir.viz.lineage import lineage
    from msir.viz.summary import SummaryError

    p = argparse.ArgumentParser(prog="msir-lineage",
                                description="write one HTML page comparing every msir summary run under DIR")
    p.add_argument("dir", metavar="DIR", help="a folder of runs (each written by msir.viz.SummaryRecord)")
    p.add_argument("-o", "--output", metavar="FILE", help="the page to write (default: DIR/lineage.html)")
    p.add_argument("--title", help="the page's title (default: 'Model lineage of DIR')")
    args = p.parse_args(argv)
    try:
        out = lineage(args.dir, args.output, title=args.title)
    except SummaryError as e:
        # a message with a location is "file:line:col: error: ..." as msir-opt prints one
        raise SystemExit(str(e) if e.loc is not None else f"msir-lineage: error: {e.message}") from None
    except OSError as e:
        raise SystemExit(f"msir-lineage: error: cannot write '{e.filename}': {e.strerror or e}") from None
    print(out)


if __name__ == "__main__":
    main()
