"""A plain-JAX training job for bench/validation/jax_check.sh: an MLP trained by
SGD on random data, with a planted leak of exactly LEAK_BYTES a step (a
float32 array kept in a list). JAX's default configuration (75 % of the GPU
preallocated). memrec marks steps and epochs; the script itself reads
memory_stats()["bytes_in_use"] right after each memrec.step() call and
writes them to the file given as argv[1], one JSON line a step.

    python3 bench/validation/jax_train.py OUT.jsonl [EPOCHS] [STEPS]
"""
import json
import sys
import time

import jax
import jax.numpy as jnp

import memrec

LEAK_BYTES = 1 << 20  # 262 144 float32: a multiple of the BFC allocator's 256-byte rounding

out = open(sys.argv[1], "w")
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
dev = jax.local_devices()[0]
key = jax.random.PRNGKey(0)
k1, k2, k3 = jax.random.split(key, 3)
params = {
    "w1": jax.random.normal(k1, (1024, 4096)) * 0.02, "b1": jnp.zeros(4096),
    "w2": jax.random.normal(k2, (4096, 10)) * 0.02, "b2": jnp.zeros(10),
}


def loss(p, x, y):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@jax.jit
def update(p, x, y):
    g = jax.grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)


x = jax.random.normal(k3, (512, 1024))
y = jax.nn.one_hot(jnp.arange(512) % 10, 10)
leak = []
step = 0
print("jax", jax.__version__, dev, "memrec probe on:", memrec.enabled(), file=sys.stderr)
for e in range(epochs):
    with memrec.epoch(e):
        for i in range(steps):
            params = update(params, x, y)
            jax.block_until_ready(params)
            leak.append(jnp.full((LEAK_BYTES // 4,), float(step), jnp.float32))
            jax.block_until_ready(leak[-1])
            time.sleep(0.002)
            memrec.step(step)
            ms = dev.memory_stats()
            out.write(json.dumps({"step": step, "t_ns": time.time_ns(), "bytes_in_use": ms["bytes_in_use"],
                                  "peak_bytes_in_use": ms.get("peak_bytes_in_use"), "pool_bytes": ms.get("pool_bytes"),
                                  "bytes_limit": ms.get("bytes_limit")}) + "\n")
            step += 1
out.close()
memrec.flush()
