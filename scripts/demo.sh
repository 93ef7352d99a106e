#!/usr/bin/env bash
# The main job. Until the namespace lab lands this runs the offline replay demo.
set -euo pipefail
exec "$(dirname "$0")/replay-demo.sh" "$@"
