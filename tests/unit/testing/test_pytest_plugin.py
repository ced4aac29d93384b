"""The pytest plugin's options, markers and report lines, run in an inner pytest session.

Nothing here starts a broker: ``KAFKA_BOOTSTRAP_SERVERS`` names a loopback port with nothing on
it, which the fixtures that only build clients accept (clients connect lazily). The fixtures that
talk to a broker are exercised for real by ``examples/user_project`` and every integration test.
"""

from __future__ import annotations

import pytest

from consumer.testing import pytest_plugin

pytest_plugins = ["pytester"]

PLUGIN = ("-p", "consumer.testing.pytest_plugin")
NOWHERE = "127.0.0.1:9"


@pytest.fixture(autouse=True)
def _inner_session(monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", NOWHERE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_seed_defaults_to_zero_and_follows_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_seed(kgm_sim_seed):
            print("SEED", kgm_sim_seed, type(kgm_sim_seed).__name__)
        """
    )
    default = pytester.runpytest_inprocess(*PLUGIN, "-s")
    default.assert_outcomes(passed=1)
    default.stdout.fnmatch_lines(["*sim seed 0 (--kgm-sim-seed)*", "*SEED 0 int*"])
    chosen = pytester.runpytest_inprocess(*PLUGIN, "-s", "--kgm-sim-seed=1234")
    chosen.assert_outcomes(passed=1)
    chosen.stdout.fnmatch_lines(["*sim seed 1234*", "*SEED 1234 int*"])


def test_a_failing_test_that_used_the_seed_reports_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_uses_seed(kgm_sim_seed):
            assert kgm_sim_seed == -1

        def test_without_seed():
            assert False
        """
    )
    result = pytester.runpytest_inprocess(*PLUGIN, "--kgm-sim-seed=77")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*kafka-group-member*", "simulation seed 77: replay with*=77"])
    assert result.stdout.str().count("replay with --kgm-sim-seed") == 1


def test_the_seed_option_rejects_a_non_integer(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(*PLUGIN, "--kgm-sim-seed=abc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kgm-sim-seed*invalid int value*"])


def test_report_header_names_the_external_cluster(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.stdout.fnmatch_lines([f"*real Kafka: KAFKA_BOOTSTRAP_SERVERS={NOWHERE}*"])


def test_real_broker_tests_are_marked_and_can_be_deselected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_sim_only(kgm_sim_seed):
            pass

        def test_talks_to_kafka(kafka_bootstrap_servers):
            pass

        def test_makes_a_topic(kafka_topic_factory):
            pass
        """
    )
    only_real = pytester.runpytest_inprocess(
        *PLUGIN, "--strict-markers", "--collect-only", "-q", "-m", pytest_plugin.REAL_KAFKA_MARKER
    )
    only_real.stdout.fnmatch_lines(["*test_talks_to_kafka", "*test_makes_a_topic", "*2/3 *"])
    rest = pytester.runpytest_inprocess(*PLUGIN, "-q", "-m", "not real_kafka")
    rest.assert_outcomes(passed=1, deselected=2)


def test_external_cluster_is_used_as_is(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_cluster(kafka_broker, kafka_bootstrap_servers):
            assert type(kafka_broker).__name__ == "ExternalKafka"
            assert kafka_broker.bootstrap_servers == kafka_bootstrap_servers == {NOWHERE!r}
        """
    )
    pytester.runpytest_inprocess(*PLUGIN).assert_outcomes(passed=1)


def test_consumer_factory_defaults_and_teardown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        made = []

        def test_members(kafka_consumer_factory):
            first = kafka_consumer_factory()
            shared = kafka_consumer_factory(group_id="g-shared")
            tuned = kafka_consumer_factory({"group.id": "g-own", "auto.offset.reset": "latest"})
            made.extend([first, shared, tuned])
            settings = [m._config for m in made]
            assert {s.group_id for s in settings} >= {"g-shared", "g-own"}
            assert settings[0].group_id.startswith("group-test_members-")
            assert [s.auto_offset_reset for s in settings] == ["earliest", "earliest", "latest"]
            with pytest.raises(ValueError, match="group_id or as config"):
                kafka_consumer_factory({"group.id": "a"}, group_id="b")

        def test_closed_at_teardown():
            assert len(made) == 3
            assert all(m._closed for m in made)
        """
    )
    pytester.runpytest_inprocess(*PLUGIN).assert_outcomes(passed=2)


def test_topic_factory_rejects_zero_partitions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_zero(kafka_topic_factory):
            with pytest.raises(ValueError, match="partitions must be at least 1, got 0"):
                kafka_topic_factory(partitions=0)
        """
    )
    pytester.runpytest_inprocess(*PLUGIN).assert_outcomes(passed=1)


@pytest.fixture
def entry_point_only(monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """Arguments that load the entry point module the way an install does, and no other
    installed plugin (so an entry point of this checkout found on the path adds nothing)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return ("-p", "pytest_kafka_group_member")


def test_entry_point_and_conftest_register_the_plugin_once(
    pytester: pytest.Pytester, entry_point_only: tuple[str, ...]
) -> None:
    """What an installed package plus a checkout's conftest does: the entry point module
    registers the plugin, and the conftest's ``pytest_plugins`` line is then a no-op."""
    pytester.makeconftest('pytest_plugins = ["consumer.testing.pytest_plugin"]\n')
    pytester.makepyfile(
        """
        def test_once(request, kgm_sim_seed):
            manager = request.config.pluginmanager
            plugins = [p for p in manager.get_plugins() if getattr(p, "__name__", "") ==
                       "consumer.testing.pytest_plugin"]
            assert len(plugins) == 1
            assert manager.get_plugin("consumer.testing.pytest_plugin") is plugins[0]
            assert kgm_sim_seed == 3
        """
    )
    result = pytester.runpytest_inprocess(*entry_point_only, "--kgm-sim-seed=3")
    result.assert_outcomes(passed=1)


def test_entry_point_alone_brings_the_fixtures_and_options(
    pytester: pytest.Pytester, entry_point_only: tuple[str, ...]
) -> None:
    pytester.makepyfile("def test_seed(kgm_sim_seed):\n    assert kgm_sim_seed == 9\n")
    result = pytester.runpytest_inprocess(*entry_point_only, "--kgm-sim-seed=9")
    result.assert_outcomes(passed=1)
    without = pytester.runpytest_inprocess("--kgm-sim-seed=9")
    assert without.ret == pytest.ExitCode.USAGE_ERROR


def test_group_sim_is_seeded_from_the_option_and_runs_a_listener(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from consumer.testing.sim.steps import join, until_stable

        class Listener:
            def __init__(self):
                self.assigned = []

            def on_assign(self, consumer, partitions):
                self.assigned.extend(partitions)

        def test_sim(group_sim):
            sim = group_sim({"orders": 4}, listener=Listener)
            assert sim.seed == 5
            result = sim.run([join("a"), join("b"), until_stable()])
            result.report.raise_for_violations()
            owned = [p for name in ("a", "b") for p in result.assignments[name]]
            assert sorted(partition for _, partition in owned) == [0, 1, 2, 3]

        def test_seed_is_not_a_keyword(group_sim):
            import pytest
            with pytest.raises(TypeError, match="--kgm-sim-seed"):
                group_sim({"orders": 1}, seed=3)
        """
    )
    result = pytester.runpytest_inprocess(*PLUGIN, "--kgm-sim-seed=5")
    result.assert_outcomes(passed=2)
