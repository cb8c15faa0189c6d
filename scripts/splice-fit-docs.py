#!/usr/bin/env python3
"""Copies a refit's tables into docs/accuracy.md.

`servesim validate A.csv B.csv --fit ... > fit.md` prints the fitted efficiencies, the fit log
and the held-out aggregates; this script puts them in docs/accuracy.md's "Fitted values
(shipped)", "Fit log (accepted steps)" and "Held out (pooled over folds)" sections, unchanged.
The other tables of that page are checked and rewritten by the tests
(`UPDATE_DOCS=1 cargo test -p servesim-core --test validate_accuracy --test validate_holdout_set`).

Usage: python3 scripts/splice-fit-docs.py fit.md [docs/accuracy.md]
"""
import sys


def section(lines, heading):
    """The lines under `heading` up to the next heading (exclusive), without the heading."""
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def table(lines):
    """The first Markdown table in `lines`."""
    rows = [i for i, l in enumerate(lines) if l.startswith("|")]
    if not rows:
        sys.exit("no table found")
    first = rows[0]
    last = first
    while last + 1 < len(lines) and lines[last + 1].startswith("|"):
        last += 1
    return lines[first : last + 1]


def replace_table(doc, heading, new_table):
    """`doc` with the first table under `heading` replaced by `new_table`."""
    start = doc.index(heading) + 1
    first = next(i for i in range(start, len(doc)) if doc[i].startswith("|"))
    last = first
    while last + 1 < len(doc) and doc[last + 1].startswith("|"):
        last += 1
    return doc[:first] + new_table + doc[last + 1 :]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    fit = open(sys.argv[1]).read().split("\n")
    path = sys.argv[2] if len(sys.argv) == 3 else "docs/accuracy.md"
    doc = open(path).read().split("\n")
    for fit_heading, doc_heading in [
        ("## Fitted efficiencies", "### Fitted values (shipped)"),
        ("### Fit log (accepted steps)", "### Fit log (accepted steps)"),
        ("### Held out (pooled over folds)", "### Held out (pooled over folds)"),
    ]:
        if fit_heading not in fit:
            sys.exit(f"{sys.argv[1]} has no section {fit_heading!r}: is it the output of --fit?")
        doc = replace_table(doc, doc_heading, table(section(fit, fit_heading)))
    open(path, "w").write("\n".join(doc))
    print(f"rewrote the fitted values, fit log and held-out tables of {path}")


if __name__ == "__main__":
    main()
