#!/usr/bin/env bash
# Copy the files FILES names from a git clone of TensorBoard, at the commit
# FILES names, into upstream/ unchanged.
#
#   bash testsupport/tbload/vendor.sh PATH_TO_TENSORBOARD_GIT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
git_dir=${1:?a git clone of github.com/tensorflow/tensorboard}
commit=$(awk '$1 == "commit" {print $2}' "$here/FILES")
rm -rf "$here/upstream"
mkdir -p "$here/upstream"
git --git-dir "$git_dir" show "$commit:LICENSE" > "$here/upstream/LICENSE"
grep -v -e '^#' -e '^commit ' "$here/FILES" | while read -r f; do
  mkdir -p "$here/upstream/$(dirname "$f")"
  git --git-dir "$git_dir" show "$commit:$f" > "$here/upstream/$f"
done
