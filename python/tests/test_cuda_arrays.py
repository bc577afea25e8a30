"""CUDA arrays handed to gpuq through __cuda_array_interface__: what is refused before any
device or CuPy is needed (these tests run everywhere; test_cupy.py solves on a GPU)."""

import numpy as np
import pytest

import gpuq
import gpuq._gpuq as core
import gpuq.amg
import gpuq.montecarlo

from conftest import laplace2d


class FakeCudaArray:
    """An object that says it is a CUDA array: nothing behind its pointer is read by the
    checks these tests reach."""

    def __init__(self, n=4, **changes):
        interface = {
            "version": 3,
            "shape": (n,),
            "typestr": "<f8",
            "data": (0x7F0000000000, False),
            "strides": None,
            "stream": None,
        }
        interface.update(changes)
        self.__cuda_array_interface__ = {k: v for k, v in interface.items() if v is not ...}


def test_a_well_formed_interface_is_read():
    assert core.cuda_array(FakeCudaArray(5)) == ("<f8", [5])
    assert core.cuda_array(FakeCudaArray(3, typestr="<c16", strides=(16,))) == ("<c16", [3])
    assert core.cuda_array(FakeCudaArray(3, version=2, stream=...)) == ("<f8", [3])
    assert core.cuda_array(FakeCudaArray(0, data=(0, False))) == ("<f8", [0])
    column = FakeCudaArray(typestr="<f4", shape=(4, 1), strides=(4, 99))
    assert core.cuda_array(column) == ("<f4", [4, 1])


def test_cuda_arrays_on_the_cpu_backend_are_a_value_error():
    a = laplace2d(2)
    with pytest.raises(ValueError, match="backend must be 'cuda' or 'auto'"):
        gpuq.solve(a, FakeCudaArray(4), backend="cpu")
    with pytest.raises(ValueError, match="backend must be 'cuda' or 'auto'"):
        gpuq.solve(a, np.ones(4), x0=FakeCudaArray(4), backend="cpu")
    with pytest.raises(ValueError, match="unknown backend"):
        gpuq.solve(a, FakeCudaArray(4), backend="gpu")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"typestr": "<U8"}, "typestr '<U8'"),
        ({"typestr": ">f8"}, "typestr '>f8'"),
        ({"typestr": "<f3"}, "typestr '<f3'"),
        ({"strides": (16,)}, "C-contiguous"),
        ({"shape": (2, 2), "strides": (8, 16)}, "C-contiguous"),
        ({"version": 1}, "version 1"),
        ({"version": 4}, "version 4"),
        ({"version": ...}, "no 'version'"),
        ({"data": ...}, "no 'data'"),
        ({"data": (0, False)}, "null"),
        ({"data": "0x1000"}, "pointer, read-only"),
        ({"shape": "4"}, "shape"),
        ({"stream": 0}, "stream"),
        ({"mask": object()}, "masked"),
    ],
)
def test_a_malformed_interface_is_a_value_error_naming_the_array(changes, message):
    bad = FakeCudaArray(4, **changes)
    with pytest.raises(ValueError, match=message) as e:
        gpuq.solve(laplace2d(2), bad, backend="cuda")
    assert str(e.value).startswith("b: ")
    with pytest.raises(ValueError, match=message):
        core.cuda_array(bad)


def test_an_interface_that_is_not_a_dict_is_a_value_error():
    class Odd:
        __cuda_array_interface__ = [("version", 3)]

    with pytest.raises(ValueError, match="not a dict"):
        gpuq.solve(laplace2d(2), Odd(), backend="auto")


def test_amg_options_without_precond_amg_are_refused_with_cuda_arrays_too():
    with pytest.raises(TypeError, match="only precond='amg' takes: block"):
        gpuq.solve(laplace2d(2), FakeCudaArray(4), block=2, backend="cuda")


def test_the_functions_without_cuda_arrays_refuse_them_and_name_gpuq_solve():
    a = laplace2d(2)
    with pytest.raises(TypeError, match="gpuq.solve"):
        gpuq.montecarlo.solve(a, FakeCudaArray(4))
    with pytest.raises(TypeError, match="gpuq.solve"):
        gpuq.amg.smoothed_aggregation_solver(a, backend="cpu").solve(FakeCudaArray(4))
