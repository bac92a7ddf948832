# What the scripts that rebuild a Debian package for its DWARF share
# (scripts/typepack-debian12-*): messages, the stage bookkeeping, the checks
# of the machine, and the mqs-dump that writes the packs. Sourced, not run.
#
# The sourcing script sets `tool` (its name, for messages) and `work` (its
# work directory) first, then calls `parse_stages "$@"` and `check_bookworm`.

say() { printf '%s: %s\n' "$tool" "$*" >&2; }
die() { say "error: $*"; exit 1; }
need_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --from N (redo stage N and later) and --until N (stop after N); stages run
# from 1 to $last_stage.
parse_stages() {
    from=1 until=$last_stage
    while [ $# -gt 0 ]; do
        case "$1" in
            --from) from=${2:?--from needs a stage number}; shift 2 ;;
            --until) until=${2:?--until needs a stage number}; shift 2 ;;
            *) die "usage: $0 [--from N] [--until N]" ;;
        esac
    done
}

# The stock packages are amd64 builds of bookworm's toolchain: a rebuild
# anywhere else would not load the same bytes.
check_bookworm() {
    [ "$(dpkg --print-architecture)" = amd64 ] || die "the stock package is amd64; this is $(dpkg --print-architecture)"
    grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release || die "run this on Debian 12 (bookworm): the rebuild must use its toolchain"
    mkdir -p "$work"
}

# A stage is skipped when it is done (and not redone by --from) or after --until.
stage_done() { { [ "$1" -lt "$from" ] && [ -f "$work/.stage-$1" ]; } || [ "$1" -gt "$until" ]; }
finish() { touch "$work/.stage-$1"; say "stage $1 ($2) done"; }

# Installed packages, one `name:arch` a line (removed ones left out).
installed_packages() {
    dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 == "ii" { print $2 }' | sort
}

# apt-get build-dep for "SOURCE=VERSION", after recording what was installed
# before it first ran, so that build_deps_left can name what it added.
build_dep() {
    [ -f "$work/packages-before" ] || installed_packages >"$work/packages-before"
    need_sudo env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$1" >&2
}

# Says which packages the rebuild installed and left. They are not removed:
# the tests' other setup scripts find their packages by presence, and one
# of them may have come with the build dependencies.
build_deps_left() {
    [ -f "$work/packages-before" ] || return 0
    installed_packages | comm -13 "$work/packages-before" - >"$work/packages-added"
    local n
    n=$(wc -l <"$work/packages-added")
    [ "$n" -eq 0 ] && return 0
    say "$n packages installed for the build stay installed, listed in $work/packages-added;" \
        "remove them (apt-get purge) once nothing else on this machine needs them"
}

# The mqs-dump that writes and checks the packs: $MQS_DUMP, else this tree's,
# built with cargo --release (into $CARGO_TARGET_DIR when set).
mqs_dump() {
    if [ -n "${MQS_DUMP:-}" ]; then
        printf '%s\n' "$MQS_DUMP"
        return
    fi
    (cd "$root" && cargo build --release -q -p mqs-dump) >&2
    printf '%s\n' "${CARGO_TARGET_DIR:-$root/target}/release/mqs-dump"
}

# Debian's build of the unpacked source in $1: nocheck skips the test suite
# (it does not change what is compiled). The log goes to $work/build.log.
# `build_env` (an array of NAME=VALUE, empty by default) is added to the
# build's environment: what makes this machine look like the buildd where it
# has more installed than the package's build dependencies.
#
# Resumable: a build that was stopped (MPICH's takes hours on 2 cores) goes
# on where it stopped when run again, without `debian/rules clean` (-nc):
# make rebuilds only what is missing, and debhelper skips the steps it
# logged as done. Whether the result still loads the stock bytes is not
# assumed: `typepack extract --built-lib` proves it or refuses.
build_env=()
# pic_only=yes: every libtool script of the build tree compiles only the PIC
# object (what the shared library is linked from), not the second, static
# one: half the compilation. The static archive is then made of the PIC
# objects (libtool's own fallback), which the packs never read; the shared
# library is byte for byte the same, and extract still proves it. The
# scripts appear during configure, so a watcher patches each one it finds,
# replacing the file (mv) so that a libtool already running keeps its copy.
pic_only=
pic_only_patch() {
    local f
    while IFS= read -r -d '' f; do
        grep -q 'mqs: PIC only' "$f" && continue
        awk '!done && /^build_old_libs=yes$/ {
                print
                print "# mqs: PIC only while compiling (the .a is then made of the PIC objects)"
                print "case \" $* \" in *\" --mode=compile \"*) build_old_libs=no ;; esac"
                done = 1; next
            } { print }' "$f" >"$f.mqs-new" && chmod --reference="$f" "$f.mqs-new" && mv "$f.mqs-new" "$f"
    done < <(find "$1" -name libtool -type f -print0)
}
pic_only_watch() { while sleep 10; do pic_only_patch "$1"; done; }
debian_build() {
    local srcdir=$1 start=$SECONDS clean=()
    rm -f "$work"/src/*.deb "$work"/src/*.ddeb "$work"/src/*.buildinfo "$work"/src/*.changes
    # A build started after every stage before it was done (no stage redone
    # since, which would mean a fresh source tree) is resumed.
    local stamp resume=
    if [ -f "$work/.build-started" ]; then
        resume=yes
        for stamp in "$work"/.stage-*; do
            [ "$stamp" -nt "$work/.build-started" ] && resume=
        done
    fi
    if [ -n "$resume" ]; then
        clean=(-nc)
        say "dpkg-buildpackage -b -nc: resuming the stopped build (log: $work/build.log)"
        printf '\n==== resumed %s\n' "$(date -u +%FT%TZ)" >>"$work/build.log"
    else
        say "dpkg-buildpackage -b (log: $work/build.log)"
        : >"$work/build.log"
    fi
    touch "$work/.build-started"
    local watcher=
    if [ -n "$pic_only" ]; then
        pic_only_patch "$srcdir"
        pic_only_watch "$srcdir" &
        watcher=$!
    fi
    local rc=0
    # The buildd's PATH (sbuild's default): no tool of this machine's own
    # (a pyenv python3 first on PATH would regenerate yaksa's sources).
    (cd "$srcdir" && env "${build_env[@]}" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEB_BUILD_OPTIONS="parallel=$jobs nocheck" nice -n 10 \
        dpkg-buildpackage -b -uc -us "${clean[@]}") >>"$work/build.log" 2>&1 || rc=$?
    [ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
    [ "$rc" -eq 0 ] || { tail -n 30 "$work/build.log" >&2; die "dpkg-buildpackage failed, see $work/build.log"; }
    rm -f "$work/.build-started"
    say "built in $((SECONDS - start)) s"
}

# The pack of the stock library $1 (a path inside the package), from the
# rebuild's DWARF, checked against the stock library: extract compares the
# rebuilt library's loaded sections with the stock one's byte for byte and
# keys the pack by the stock build-id. $2: the pack file, $3: provenance,
# $4: the query list (empty: mqs-dump's built-in one).
# `pack_flags` (an array, empty by default) is added to the extract:
# --close-rebuild where the rebuild cannot load the stock bytes.
pack_flags=()
make_pack() {
    local lib=$1 pack=$2 provenance=$3 queries=${4:-}
    local extra=("${pack_flags[@]}")
    [ -n "$queries" ] && extra+=(--queries "$queries")
    "$dump" typepack extract --lib "$work/stock/$lib" --built-lib "$work/rebuilt/$lib" \
        --debug-dir "$work/dbgsym/usr/lib/debug" --provenance "$provenance" \
        "${extra[@]}" --out "$pack"
    "$dump" typepack check --lib "$work/stock/$lib" --typepack "$(dirname "$pack")"
}
