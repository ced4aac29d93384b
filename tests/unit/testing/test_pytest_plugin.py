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
