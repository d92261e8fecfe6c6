"""Declared jobs in the store, on both stores: a submit by name as its declaration says.

Workers are stood in for by their two writes (tests/support/declared_store.py);
the acceptance tier runs real workers (tests/acceptance/test_declared_jobs.py).
Batches, workflows and schedules by name: test_declared_batches.py.
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, Parameter, function_publish
from taskq.broker.ops.workers import worker_register, worker_set_state
from taskq.broker.records import JobState
from tests.support.declared_store import client, declaration, names, serving

__all__ = ["client"]  # the fixture


def test_a_submit_by_name_takes_the_declared_options_and_given_ones_win(
    client: taskq.Client,
) -> None:
    name, queue = names()
    retry = {"base": 2.0, "factor": 3.0, "cap": 60.0, "jitter": 0.0}
    serving(
        client,
        "w1",
        [queue],
        declaration(name, queue=queue, max_attempts=5, timeout=600.0, retry=retry),
    )

    declared = client.get(client.submit(name, "in.txt").id)
    assert (declared.queue, declared.max_attempts, declared.timeout) == (queue, 5, 600.0)
    assert declared.payload == {"target": name, "args": ["in.txt"], "kwargs": {}}
    assert declared.retry is not None
    assert declared.retry["base"] == 2.0

    own_retry = {"base": 1.0, "factor": 1.0, "cap": 1.0, "jitter": 0.0}
    given = client.get(
        client.submit(
            name, "in.txt", queue=f"{queue}-other", max_attempts=1, timeout=5.0, retry=own_retry
        ).id
    )
    assert (given.queue, given.max_attempts, given.timeout) == (f"{queue}-other", 1, 5.0)
    assert given.retry is not None
    assert given.retry["base"] == 1.0


def test_bad_arguments_are_refused_at_submit_with_nothing_written(client: taskq.Client) -> None:
    name, queue = names()
    serving(client, "w1", [queue], declaration(name, queue=queue))
    cases = [
        ((), {}, "missing a required argument: 'path'"),
        (("a", "b"), {}, r"2 positional arguments given, it takes 1 \(path\)"),
        (("a",), {"lowr": False}, "unexpected keyword argument 'lowr'"),
        # Both faults at once, where inspect tells the first only.
        (
            (),
            {"lowr": False},
            "missing a required argument: 'path'; and it takes no keyword argument 'lowr'",
        ),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(errors.InvalidJob, match=message) as refused:
            client.submit(name, *args, kwargs=kwargs)
        assert refused.value.field == "args"
    assert client.list(taskq.JobQuery(queue=queue)) == []


def resize(name: str, queue: str) -> Declaration:
    """``name(path: str, scale: float, *, sizes: list[int] | None = None)`` of ``queue``."""
    return Declaration(
        name=name,
        parameters=(
            Parameter("path", "POSITIONAL_OR_KEYWORD", annotation="str"),
            Parameter("scale", "POSITIONAL_OR_KEYWORD", annotation="float"),
            Parameter("sizes", "KEYWORD_ONLY", default="None", annotation="list[int] | None"),
        ),
        options={"queue": queue},
    )


def test_a_value_of_the_wrong_type_is_refused_at_submit_with_nothing_written(
    client: taskq.Client,
) -> None:
    name, queue = names()
    serving(client, "w1", [queue], resize(name, queue))
    said = f"{name}(path: str, scale: float, *, sizes: list[int] | None = None) refuses these "
    cases = [
        (("a.png", "five"), {}, "scale: float was given 'five', a str"),
        ((5, 0.5), {}, "path: str was given 5, an int"),
        (
            ("a.png", 0.5),
            {"sizes": [800, "400"]},
            "sizes: list[int] | None was given [800, '400'], a list: sizes[1] is '400', a str, "
            "not int",
        ),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(errors.InvalidJob) as refused:
            client.submit(name, *args, kwargs=kwargs)
        assert str(refused.value) == f"{said}arguments: {message}"
        assert refused.value.field == "args"
    # One call refused in a batch: none of it is written.
    with pytest.raises(errors.InvalidJob, match=r"entry 2 of the batch .*'five', a str"):
        client.submit_many(name, [("a.png", 0.5), ("b.png", "five")])
    assert client.list(taskq.JobQuery(queue=queue)) == []

    # An int for a float, a tuple for a list: the job receives what it asks for.
    handle = client.submit(name, "a.png", 2, kwargs={"sizes": (800, 400)})
    assert client.get(handle.id).payload["args"] == ["a.png", 2]


def test_the_command_line_checks_the_values_it_parsed(
    client: taskq.Client, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``taskq submit`` reads each argument as JSON: ``5`` is an int, ``'"five"'`` a string,
    ``five`` no JSON at all, refused before the store is asked."""
    from taskq.cli.main import main

    name, queue = names()
    serving(client, "w1", [queue], resize(name, queue))
    assert main(["submit", "--store", url, name, '"a.png"', '"five"']) == 2
    assert "scale: float was given 'five', a str" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["submit", "--store", url, name, '"a.png"', "five"])
    assert usage.value.code == 2
    assert "'five' is not JSON" in capsys.readouterr().err
    assert client.list(taskq.JobQuery(queue=queue)) == []

    assert (
        main(["submit", "--store", url, name, '"a.png"', "5", "--kwargs", '{"sizes": [1,2]}']) == 0
    )
    [job] = client.list(taskq.JobQuery(queue=queue))
    assert (job.payload["args"], job.payload["kwargs"]) == (["a.png", 5], {"sizes": [1, 2]})


def test_an_unknown_name_is_refused_with_close_names_and_unchecked_takes_it(
    client: taskq.Client,
) -> None:
    name, queue = names()
    serving(client, "w1", [queue], declaration(name, queue=queue))
    misspelt = name.replace("count_words", "count_word")
    with pytest.raises(errors.UnknownFunction, match=f"did you mean {name}") as refused:
        client.submit(misspelt, "in.txt", queue=queue)
    assert refused.value.suggestions[0] == name  # the closest first (others on a shared store)
    assert client.list(taskq.JobQuery(queue=queue)) == []

    handle = client.submit(misspelt, "in.txt", queue=queue, unchecked=True)
    job = client.get(handle.id)
    assert (job.state, job.payload["target"], job.max_attempts) == (JobState.QUEUED, misspelt, 3)


def test_a_declared_job_submitted_as_a_function_is_unchanged(client: taskq.Client) -> None:
    from tests.support.declared_jobs import greet

    # No worker has published greet: a declared job carries its own options.
    job = client.get(client.submit(greet, "ada").id)
    assert (job.queue, job.max_attempts, job.labels) == ("declared", 2, ("test",))


def test_the_newest_version_a_live_worker_serves_wins(client: taskq.Client) -> None:
    name, queue = names()
    old = serving(client, "old", [queue], declaration(name, queue=queue, max_attempts=2))
    new = serving(client, "new", [queue], declaration(name, queue=queue, max_attempts=7))

    def attempts() -> int:
        return client.get(client.submit(name, "in.txt").id).max_attempts

    assert attempts() == 7
    plan.run(client.store, worker_set_state(new, "stopped"))
    assert attempts() == 2  # the new version's only worker left: the old one serves
    plan.run(client.store, worker_set_state(old, "stopped"))
    assert attempts() == 7  # none live: the newest published

    [listed] = [each for each in client.functions() if each.name == name]
    assert (listed.versions, listed.live, listed.workers) == (2, False, ())


def test_a_version_whose_queue_its_worker_leaves_to_others_is_not_the_one_served(
    client: taskq.Client,
) -> None:
    # The new version names a queue the worker that declares it does not take: a job
    # submitted by it would run on the old version's worker, so the old one is served.
    name, queue = names()
    serving(client, "old", [queue], declaration(name, queue=queue, max_attempts=2))
    serving(client, "new", [f"{queue}-other"], declaration(name, queue=queue, max_attempts=7))
    assert client.get(client.submit(name, "in.txt").id).max_attempts == 2
    [listed] = [each for each in client.functions() if each.name == name]
    assert listed.live


def test_functions_lists_signature_queue_and_live_workers(client: taskq.Client) -> None:
    name, queue = names()
    worker_id = serving(client, "w1", [queue], declaration(name, queue=queue))
    [listed] = [each for each in client.functions() if each.name == name]
    assert listed.signature == f"{name}(path: str, *, lower: bool = True)"
    assert (listed.queue, listed.doc, listed.live) == (queue, "Count the words of a file.", True)
    assert listed.workers == (worker_id,)


def test_functions_lists_only_workers_that_take_the_declared_queue_with_its_labels(
    client: taskq.Client,
) -> None:
    name, queue = names()
    gpu = f"{queue}-gpu"
    on_gpu = f"{name}_on_gpu"
    # One module, two jobs: the worker publishes both but takes only the first one's queue.
    elsewhere = serving(
        client, "w1", [queue], declaration(name, queue=queue), declaration(on_gpu, queue=gpu)
    )
    # The job needs labels cuda and fp64: a worker of its queue with only cuda cannot claim it.
    needs = declaration(f"{name}_labelled", queue=gpu, labels=["cuda", "fp64"])
    unlabelled = serving(client, "w2", [gpu], needs)
    labelled = f"w3-{unlabelled}"
    plan.run(client.store, function_publish(labelled, [needs]))
    for worker_id, labels in ((unlabelled, ["cuda"]), (labelled, ["cuda", "fp64", "x"])):
        plan.run(
            client.store,
            worker_register(
                worker_id, name="w", host="h", pid=1, queues=[gpu], labels=labels, slots=1
            ),
        )

    listed = {each.name: each.workers for each in client.functions()}
    assert listed[name] == (elsewhere,)
    assert listed[on_gpu] == ()
    assert listed[f"{name}_labelled"] == (labelled,)


def test_a_queue_no_live_worker_takes_is_not_served(client: taskq.Client) -> None:
    name, queue = names()
    worker_id = serving(client, "w1", [queue], declaration(name, queue=queue))
    assert queue in client.served_queues()
    plan.run(client.store, worker_set_state(worker_id, "stopped"))
    assert queue not in client.served_queues()


IMPORTABLE = "tests.support.importable_jobs"


def test_a_name_this_process_imports_is_submitted_as_the_function_would_be(
    client: taskq.Client,
) -> None:
    """No worker declares it yet, but the client imports it: checked against its signature."""
    name, queue = f"{IMPORTABLE}:resize", names()[1]
    job = client.get(client.submit(name, "in.png", kwargs={"width": 400}, queue=queue).id)
    assert (job.queue, job.max_attempts, job.state) == (queue, 3, JobState.QUEUED)
    assert job.payload == {"target": name, "args": ["in.png"], "kwargs": {"width": 400}}

    with pytest.raises(errors.InvalidJob, match="missing a required argument: 'path'") as bad:
        client.submit(name, queue=queue)
    assert bad.value.field == "args"
    assert [each.id for each in client.list(taskq.JobQuery(queue=queue))] == [job.id]


def test_a_name_that_imports_under_another_name_or_not_at_all_is_refused(
    client: taskq.Client,
) -> None:
    """``echo`` is only imported into the module: a worker would not find it by this name."""
    queue = names()[1]
    for name in (f"{IMPORTABLE}:echo", f"{IMPORTABLE}:no_such_job", "tests.no_such_module:f"):
        with pytest.raises(errors.UnknownFunction, match="nor does this process import"):
            client.submit(name, 1, queue=queue)
    # Misspelt, it is offered the module's own jobs close to it (echo is not one).
    with pytest.raises(errors.UnknownFunction, match=f"did you mean {IMPORTABLE}:resize") as typo:
        client.submit(f"{IMPORTABLE}:resise", "in.png", queue=queue)
    assert f"{IMPORTABLE}:resize" in typo.value.suggestions
    assert client.list(taskq.JobQuery(queue=queue)) == []


def test_a_module_that_is_here_but_does_not_import_says_why(client: taskq.Client) -> None:
    queue = names()[1]
    with pytest.raises(errors.InvalidJob, match="taskq_tests_missing_dependency") as refused:
        client.submit("tests.support.importable_broken:resize", "in.png", queue=queue)
    assert refused.value.field == "target"
    assert client.list(taskq.JobQuery(queue=queue)) == []


def test_a_workers_declaration_wins_over_the_function_imported_here(
    client: taskq.Client,
) -> None:
    name, queue = f"{IMPORTABLE}:resize_declared", names()[1]
    serving(client, "w1", [queue], declaration(name, queue=queue, max_attempts=7))
    job = client.get(client.submit(name, "in.png").id)
    assert (job.queue, job.max_attempts) == (queue, 7)
    # Misspelt, it is both a declared and an importable name close to it: offered once.
    with pytest.raises(errors.UnknownFunction) as typo:
        client.submit(f"{name}x", "in.png")
    assert typo.value.suggestions.count(name) == 1
    assert str(typo.value).count(f"{name} ") + str(typo.value).count(f"{name}?") == 1


def test_the_command_line_never_imports_a_name(url: str) -> None:
    """The command line and taskq serve resolve names from workers' declarations only."""
    from taskq.cli.connection import client_at

    with (
        client_at(url) as cli_client,
        pytest.raises(errors.UnknownFunction, match="no worker has declared"),
    ):
        cli_client.submit(f"{IMPORTABLE}:resize_unimported", "in.png")
