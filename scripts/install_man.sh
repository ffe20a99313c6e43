#!/usr/bin/env bash
# Put corecast's man pages (man/*.1, made by scripts/gen_cli_docs.py) where `man`, `whatis` and
# `apropos` find them, as links to this tree's pages (so a regenerated page is seen at once),
# and index them (mandb), removing links to pages that are gone:
#
#     scripts/install_man.sh PREFIX...     # into PREFIX/share/man/man1
#
# scripts/setup.sh calls it with the virtual environment (.venv/share/man, where `pip install .`
# puts the pages; man-db finds it for whoever has .venv/bin on PATH) and, as root, /usr/local
# (on man's default path, so `man corecast-usl` works in any shell). See docs/DEVELOPING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$PWD
for prefix in "$@"; do
    dir="$prefix/share/man/man1"
    mkdir -p "$dir"
    for page in man/*.1; do
        ln -sfn "$tree/$page" "$dir/$(basename "$page")"
    done
    for link in "$dir"/corecast*.1; do
        [ -L "$link" ] && [ ! -e "$link" ] && rm -f "$link"
    done
    if command -v mandb >/dev/null; then
        # A directory on man's global path is indexed under the name man gives it (on Debian
        # /usr/local/man, a link to share/man): mandb with no argument; any other on its own.
        case ":$(manpath -g 2>/dev/null):" in
            *":$prefix/share/man:"*|*":$prefix/man:"*) where=() ;;
            *) where=("$prefix/share/man") ;;
        esac
        mandb -q "${where[@]}" 2>/dev/null \
            || echo "install_man: note: mandb could not index $prefix/share/man (whatis and apropos will not know corecast)"
    fi
done
exit 0
