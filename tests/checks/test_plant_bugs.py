"""checks/plant_bugs.py's table and its handling, without planting anything (the check itself is by hand).

Every plant's text must occur exactly once in the tree as it is, so the table
cannot rot silently when the code it plants in changes; and the table's
handling (finding, applying, refusing) is held to a small tree of its own.
"""

from __future__ import annotations

import pytest

from checks import plant_bugs

from corpus import ROOT


def test_every_plant_applies_to_the_tree_as_it_is():
    assert plant_bugs.problems(ROOT) == []


def test_the_table_holds_the_plants_the_docs_promise():
    by_name = {plant.name: plant for plant in plant_bugs.PLANTS}
    assert by_name["nki-launch-swaps-grad-output-and-output"].rebuild is False
    assert by_name["cpu-maximum-drops-plus-zero-over-minus-zero"].rebuild is True
    assert len(by_name) == len(plant_bugs.PLANTS) >= 4


def small_tree(tmp_path, text):
    (tmp_path / "lib.py").write_text(text)
    (tmp_path / "test_lib.py").write_text("")
    return tmp_path


def plant(find, tests=("test_lib.py",), path="lib.py"):
    return plant_bugs.Plant(name="p", path=path, find=find, replace="BUG", tests=tests, bug="a test plant")


@pytest.mark.parametrize("text, expected", [("a = 1\n", "occurs 0 times"), ("x\nx\n", "occurs 2 times")])
def test_a_text_found_other_than_once_is_a_problem(tmp_path, text, expected):
    (problem,) = plant_bugs.problems(small_tree(tmp_path, text), [plant("x\n")])
    assert problem.startswith("p: ") and expected in problem and "lib.py" in problem


def test_missing_files_and_tests_are_problems(tmp_path):
    tree = small_tree(tmp_path, "x\n")
    assert plant_bugs.problems(tree, [plant("x\n", path="gone.py")]) == ["p: gone.py does not exist"]
    assert plant_bugs.problems(tree, [plant("x\n", tests=("test_gone.py::test_a",))]) == [
        "p: test_gone.py::test_a names no file"]
    assert plant_bugs.problems(tree, [plant("x\n", tests=())]) == ["p: names no test"]


def test_apply_replaces_the_one_occurrence_and_refuses_otherwise(tmp_path):
    tree = small_tree(tmp_path, "a\nx\nb\n")
    plant_bugs.apply(plant("x\n"), tree)
    assert (tree / "lib.py").read_text() == "a\nBUGb\n"
    with pytest.raises(plant_bugs.CheckError, match="does not occur once"):
        plant_bugs.apply(plant("x\n"), tree)


def test_list_and_unknown_names(capsys):
    assert plant_bugs.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(plant.name in listed for plant in plant_bugs.PLANTS)
    with pytest.raises(SystemExit) as raised:
        plant_bugs.main(["no-such-plant"])
    assert raised.value.code == 2 and "unknown plant(s) no-such-plant" in capsys.readouterr().err
