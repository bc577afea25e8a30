"""Every ```python block of the READMEs (the repository's and python/README.md) runs."""

import pathlib
import re

import pytest

HERE = pathlib.Path(__file__).resolve().parent
READMES = [HERE.parent / "README.md", HERE.parent.parent / "README.md"]


def blocks():
    for path in READMES:
        if not path.exists():
            continue
        text = path.read_text()
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            yield pytest.param(block, id=f"{path.parent.name}/{path.name}#{i}")


@pytest.mark.parametrize("code", list(blocks()))
def test_readme_python_block_runs(code):
    exec(compile(code, "<README>", "exec"), {})


def test_the_readmes_have_python_examples():
    assert len(list(blocks())) >= 1
