#!/bin/sh
# Copies the latest measured tables into the docs, between their markers, so
# the docs show the run that is on disk and nothing older:
#
#   docs/performance.md  <- bench/results/bench.md (what `make bench` writes)
#   docs/chaos.md        <- the runs table of a chaos report's Markdown
#                           (CHAOS_REPORT, default chaos-report-quick.md, what
#                           `make chaos` writes), if that file exists
#
# A marker pair is `<!-- begin: NAME -->` and `<!-- end: NAME -->` on lines of
# their own; everything between them is replaced.
set -eu
cd "$(dirname "$0")/.."

# splice DOC NAME FILE: replace DOC's block NAME with FILE's contents.
splice() {
	doc=$1 name=$2 src=$3
	grep -qx "<!-- begin: $name -->" "$doc" || { echo "$doc: no marker <!-- begin: $name -->" >&2; exit 1; }
	grep -qx "<!-- end: $name -->" "$doc" || { echo "$doc: no marker <!-- end: $name -->" >&2; exit 1; }
	tmp=$(mktemp)
	awk -v begin="<!-- begin: $name -->" -v end="<!-- end: $name -->" -v src="$src" '
		$0 == begin {
			print; print ""
			n = 0
			while ((getline line < src) > 0) buf[++n] = line
			while (n > 0 && buf[n] == "") n--
			for (i = 1; i <= n; i++) print buf[i]
			print ""
			skip = 1; next
		}
		$0 == end   { skip = 0 }
		!skip       { print }
	' "$doc" >"$tmp"
	mv "$tmp" "$doc"
	echo "$doc: block $name from $src"
}

splice docs/performance.md bench/results/bench.md bench/results/bench.md

report=${CHAOS_REPORT:-chaos-report-quick.md}
if [ -f "$report" ]; then
	# The report's first line is its title; keep the run's description and
	# the runs table, up to the report's first section.
	runs=$(mktemp)
	awk 'NR == 1 && /^# / { next } /^## / { exit } { print }' "$report" |
		sed -e '/./,$!d' >"$runs"
	splice docs/chaos.md chaos-report "$runs"
	rm -f "$runs"
else
	echo "docs/chaos.md: unchanged ($report not found; make chaos writes it)"
fi
