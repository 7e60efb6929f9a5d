"""What a careless or hostile environment gets is one line, not a traceback or a wait: the
cluster variables of a --distributed run read before anything waits on them."""

import pytest

from tests import binaries


@pytest.mark.parametrize(
    "address, count, rank, said",
    [
        ("127.0.0.1:1234", -1, 0, "the number of processes (JAX_NUM_PROCESSES) must be in 1.."),
        ("127.0.0.1:1234", 99999999999999999999, 0, "must be in 1..2,147,483,647, got 9999"),
        ("127.0.0.1:1234", 2, 2, "process id 2 is outside 0..1"),
        ("[::1", 2, 0, "(JAX_COORDINATOR_ADDRESS) '[::1' is not host:port"),
        ("localhost", 2, 0, "'localhost' is not host:port"),
        ("localhost:99999", 2, 0, "with a port in 1..65535"),
        ("::1:1234", 2, 0, "is not host:port (e.g. 10.0.0.1:1234, [::1]:1234)"),
    ],
)
def test_bad_cluster_variables_are_refused_before_any_wait(address, count, rank, said):
    from foltr_jax.core import multiprocess

    with pytest.raises(multiprocess.DistributedError) as caught:
        multiprocess.initialize(address, count, rank, timeout=1)
    assert said in str(caught.value)


def test_addresses_that_read_as_host_and_port_pass():
    from foltr_jax.core import multiprocess

    for address in ("127.0.0.1:1234", "[::1]:1234", "node-7.cluster:65535", "h:1"):
        multiprocess.check_address(address)


@pytest.mark.parametrize("count", ["-1", "99999999999999999999"])
def test_a_binary_says_a_bad_process_count_in_one_line(tmp_path, count):
    env = {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234", "JAX_NUM_PROCESSES": count,
           "JAX_PROCESS_ID": "0"}  # fmt: skip
    done = binaries.call("fpdgd", "--distributed", f"--output_dir={tmp_path / 'out'}", env=env)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("fpdgd: error: --distributed: the number of processes"), line
