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
)

sl_log() { printf '\033[1m[sparselens]\033[0m %s\n' "$*" >&2; }

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
