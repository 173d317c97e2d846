# Source this to work in the gato workspace by hand:  source scripts/activate.sh
# (The README's two commands do it for you.)
_gato_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$_gato_root/scripts/env.sh"
source "$_gato_root/.venv/bin/activate"
# colcon's generated setup scripts reference unset variables; relax nounset.
_gato_nounset=$([[ $- == *u* ]] && echo 1 || echo 0); set +u
[[ -f "$_gato_root/install/setup.bash" ]] && source "$_gato_root/install/setup.bash"
[[ $_gato_nounset == 1 ]] && set -u
export GATO_ROOT="$_gato_root"
unset _gato_root _gato_nounset
