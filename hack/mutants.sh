#!/usr/bin/env bash
# mutants.sh applies each mutant of mutants/list, one at a time, to a
# scratch copy of the tree (the working tree is never edited), runs the
# mutant's tests there, and writes mutants/RESULTS.md. A mutant is caught
# when one of its tests fails; it survives when all pass. It exits 1 if a
# mutant survives that the list does not argue equivalent, or if one no
# longer applies (its line changed: update the list).
#
#   hack/mutants.sh [NAME...]     # all mutants, or the ones named
#
# MUTANT_SEEDS (default 2000) bounds each `test: sim` (a simtest that
# stops at its first violation); GO is the go command. MUTANT_TESTS, a
# grep -E pattern, runs only the tests it matches: MUTANT_TESTS=Simulation
# asks whether the simulation alone catches a mutant that an earlier test
# catches first.
set -euo pipefail
# Without -trimpath the build cache keys every package by its directory,
# and each scratch copy would compile the whole module again.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

root=$(git rev-parse --show-toplevel)
cd "$root"
GO=${GO:-go}
seeds=${MUTANT_SEEDS:-2000}
list=mutants/list
out=mutants/RESULTS.md
sim="$GO test -count=1 -timeout 10m -run '^TestSimulation\$' ./agent/simulation -seeds $seeds -steps 100 -maxfail 1"

declare -a names files afters froms tos tests whys equivs
n=-1
while IFS= read -r line || [ -n "$line" ]; do
	case "$line" in '#'* | '') continue ;; esac
	k=${line%%:*}
	v=${line#*: }
	case "$k" in
	name) n=$((n + 1)); names[n]=$v; files[n]=; afters[n]=; froms[n]=; tos[n]=; tests[n]=; whys[n]=; equivs[n]= ;;
	file) files[n]=$v ;;
	after) afters[n]=$v ;;
	from) froms[n]=$v ;;
	to) tos[n]=$v ;;
	test) [ "$v" = sim ] && v=$sim; tests[n]+="$v"$'\n' ;;
	why) whys[n]=$v ;;
	equivalent) equivs[n]=$v ;;
	*) echo "$list: unknown key '$k' in: $line" >&2; exit 2 ;;
	esac
done <"$list"

want=" $* "
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
rows=()
bad=0
for i in $(seq 0 "$n"); do
	name=${names[i]}
	if [ $# -gt 0 ] && [[ $want != *" $name "* ]]; then continue; fi
	tree="$scratch/$name"
	mkdir -p "$tree"
	# The tree as it is now, uncommitted edits included, without .git.
	git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tree"
	f="$tree/${files[i]}"
	if ! AFTER=${afters[i]} FROM=${froms[i]} TO=${tos[i]} perl -0777 -i -pe '
		my $at = 0;
		if (length $ENV{AFTER}) { $at = index($_, $ENV{AFTER}); die "after-line not found\n" if $at < 0; }
		my $j = index($_, $ENV{FROM}, $at); die "line not found\n" if $j < 0;
		substr($_, $j, length $ENV{FROM}) = $ENV{TO};' "$f" || cmp -s "$f" "${files[i]}"; then
		echo "== $name: does not apply to ${files[i]} (its line changed): update $list" >&2
		rows+=("| $name | \`${files[i]}\` | - | **does not apply** |")
		bad=1
		continue
	fi
	echo "== $name (${files[i]})"
	if ! (cd "$tree" && $GO build "./$(dirname "${files[i]}")" 2>"$tree.build"); then
		cat "$tree.build" >&2
		rows+=("| $name | \`${files[i]}\` | - | **does not build** |")
		bad=1
		continue
	fi
	verdict="survived"
	by="-"
	while IFS= read -r cmd; do
		[ -n "$cmd" ] || continue
		if [ -n "${MUTANT_TESTS:-}" ] && ! grep -qE -- "$MUTANT_TESTS" <<<"$cmd"; then continue; fi
		echo "   $cmd"
		start=$(date +%s)
		if (cd "$tree" && eval "$cmd") >"$tree.log" 2>&1; then
			echo "   passed ($(($(date +%s) - start)) s)"
			continue
		fi
		# The first line that says what failed: a violation or a test's
		# message, else the failing test's name or a panic.
		first=$(grep -m1 -E '^(VIOLATION|    .*_test.go:[0-9]+:)' "$tree.log" || grep -m1 -E '^(--- FAIL|panic:|FAIL)' "$tree.log" || true)
		first=$(echo "$first" | sed 's/^ *//' | cut -c1-160)
		echo "   FAILED ($(($(date +%s) - start)) s): $first"
		verdict="caught"
		by="\`${cmd//|/\\|}\`: ${first//|/\\|}"
		break
	done <<<"${tests[i]}"
	if [ "$verdict" = survived ]; then
		if [ -n "${equivs[i]}" ]; then
			verdict="survived (equivalent: see below)"
		else
			verdict="**survived**"
			bad=1
		fi
	fi
	echo "   $verdict"
	rows+=("| $name | \`${files[i]}\` | $by | $verdict |")
	rm -rf "$tree" "$tree.log" "$tree.build"
done

# The results file is rewritten only for a run of the whole list.
if [ $# -eq 0 ]; then
	{
		echo "# Mutants: the last result"
		echo
		echo "Written by \`make mutants\` (hack/mutants.sh, MUTANT_SEEDS=$seeds) at commit"
		echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!mutants/RESULTS.md' || echo ' plus uncommitted edits'), $(date -u +%Y-%m-%d). Each mutant is one edit of"
		echo "mutants/list applied to a scratch copy; its tests run in order and the first"
		echo "failure catches it. \`sim\` is \`$sim\`."
		echo
		echo "| mutant | file | caught by (first failure) | result |"
		echo "|---|---|---|---|"
		printf '%s\n' "${rows[@]}"
		echo
		echo "## What each mutant breaks"
		echo
		for i in $(seq 0 "$n"); do
			echo "- **${names[i]}**: ${whys[i]}"
			[ -z "${equivs[i]}" ] || echo "  Equivalent: ${equivs[i]}"
		done
	} >"$out"
	echo "wrote $out"
fi
exit $bad
