# Sourced by build.sh and tsan.sh. configure_once DIR [MESON SETUP OPTIONS...]: puts ccache in
# front of g++ when ccache is there and no CXX is chosen, and configures the meson build
# directory DIR with the options unless it is configured already.
configure_once() {
  local dir=$1
  shift
  if command -v ccache >/dev/null && [ -z "${CXX:-}" ]; then
    export CXX="ccache g++"
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$@" "$dir" >/dev/null
  fi
}
