#!/usr/bin/env bash
# The testing kit from a user's point of view (CI runs this from tox's `ci` env):
#   1. a fresh venv outside the source tree, with a normal (non-editable) install of this
#      checkout and its `testing` extra;
#   2. a copy of examples/user_project somewhere else, as a user's own project;
#   3. `pytest --fixtures` there must list the plugin's fixtures, loaded from the installed
#      package by its pytest11 entry point (no conftest);
#   4. a conftest that also names the plugin (`pytest_plugins`) must not register it twice;
#   5. `pytest` there: the tests run against the local broker the plugin starts.
# Extra arguments go to the last pytest run. Reuses pip's cache and the per-user Kafka jar cache.
# PYTHON picks the interpreter for the venv (default: python3).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/kgm-user-project.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS
# The user's shell knows nothing of this checkout, and the plugin must start its own broker.
unset PYTHONPATH KAFKA_BOOTSTRAP_SERVERS VIRTUAL_ENV
export PIP_DISABLE_PIP_VERSION_CHECK=1

# Build from a copy of the packaging inputs: pip builds a local folder in place, and a stale
# build/ folder in the checkout could slip removed modules into the wheel.
mkdir "$work/src"
cp "$repo/pyproject.toml" "$repo/README.md" "$repo/pytest_kafka_group_member.py" "$work/src/"
(cd "$repo" && tar cf - --exclude=__pycache__ consumer) | tar xf - -C "$work/src"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work/src[testing]"
rm -rf "$work/src"
echo "[user-project] installed kafka-group-member[testing] in a fresh venv ($((SECONDS - started)) s)"

cp -r "$repo/examples/user_project" "$work/user_project"
find "$work/user_project" -name __pycache__ -prune -exec rm -rf {} +
cd "$work/user_project"
pytest=("$work/venv/bin/python" -m pytest -p no:cacheprovider)

fixtures=$("${pytest[@]}" --fixtures)
for name in kafka_broker kafka_bootstrap_servers kafka_admin kafka_topic kafka_topic_factory \
  kafka_consumer_factory kafka_producer kafka_unique_name kgm_sim_seed; do
  if ! grep -Eq "^$name( |$)" <<<"$fixtures"; then
    echo "[user-project] pytest --fixtures does not list $name" >&2
    exit 1
  fi
done
if ! grep -q "site-packages/consumer/testing/pytest_plugin.py" <<<"$fixtures"; then
  echo "[user-project] the fixtures do not come from the installed package" >&2
  exit 1
fi
echo "[user-project] pytest --fixtures lists the plugin's fixtures (from site-packages)"

mkdir "$work/twice"
printf 'pytest_plugins = ["consumer.testing.pytest_plugin"]\n' >"$work/twice/conftest.py"
printf 'def test_seed(kgm_sim_seed):\n    assert kgm_sim_seed == 5\n' >"$work/twice/test_twice.py"
(cd "$work/twice" && "${pytest[@]}" -q --kgm-sim-seed=5 >/dev/null) || {
  echo "[user-project] a conftest naming the installed plugin broke the run" >&2
  exit 1
}
echo "[user-project] entry point + conftest pytest_plugins: registered once"

"${pytest[@]}" "$@"
echo "[user-project] passed in a fresh venv in $((SECONDS - started)) s"
