#!/bin/sh
# Checks the user docs: every relative link in README.md, CONTRIBUTING.md and
# docs/*.md points at a file that exists (and, with #anchor, at a heading of
# that file), and every README code block marked
# `<!-- example: PATH -->` is identical to PATH from its import block on (from
# its package clause on when the block starts with one), so the README's
# example is the one `go vet` compiles and `go test` runs.
set -eu
cd "$(dirname "$0")/.."

fail=0

# slugs FILE: the GitHub anchors of FILE's headings, one a line.
slugs() {
	grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' |
		sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

for doc in README.md CONTRIBUTING.md docs/*.md; do
	[ -f "$doc" ] || continue
	dir=$(dirname "$doc")
	# Links outside code blocks: ](target) with target not a URL.
	awk '/^```/ { code = !code; next } !code' "$doc" |
		grep -oE '\]\([^)[:space:]]+\)' | sed -E 's/^\]\(//; s/\)$//' |
		grep -vE '^(https?|mailto):' | sort -u >/tmp/check-docs.$$ || true
	while IFS= read -r link; do
		path=${link%%#*}
		anchor=
		case $link in *'#'*) anchor=${link#*#} ;; esac
		if [ -z "$path" ]; then
			target=$doc
		else
			target=$dir/$path
		fi
		if [ ! -e "$target" ]; then
			echo "$doc: broken link $link ($target does not exist)"
			fail=1
			continue
		fi
		if [ -n "$anchor" ] && [ -f "$target" ]; then
			if ! slugs "$target" | grep -qx -- "$anchor"; then
				echo "$doc: link $link: no heading #$anchor in $target"
				fail=1
			fi
		fi
	done </tmp/check-docs.$$
	rm -f /tmp/check-docs.$$
done

# README examples.
grep -oE '^<!-- example: [^ ]+ -->$' README.md | sed -E 's/^<!-- example: //; s/ -->$//' |
	while IFS= read -r src; do
		block=$(awk -v m="<!-- example: $src -->" '
			$0 == m { want = 1; next }
			want && /^```/ { if (inside) exit; inside = 1; next }
			inside { print }
		' README.md)
		case $block in
		'package '*) file=$(sed -n '/^package /,$p' "$src") ;;
		*) file=$(sed -n '/^import (/,$p' "$src") ;;
		esac
		if [ "$block" != "$file" ]; then
			echo "README.md: the example marked $src differs from $src:"
			printf '%s\n' "$file" >/tmp/check-docs-file.$$
			printf '%s\n' "$block" | diff -u /tmp/check-docs-file.$$ - || true
			rm -f /tmp/check-docs-file.$$
			exit 1
		fi
	done || fail=1

if [ "$fail" -ne 0 ]; then
	exit 1
fi
echo "docs: links and README examples ok"
