"""The memory budget: what the model's own tensors hold on each GPU.

``memrec.watch(model, optimizer)`` hands the probe a model and its optimizer.
At the allocator samples the probe already takes (a step's, an epoch mark's),
it adds the bytes of four categories to the sample's ``torch`` line:

- parameters: ``model.parameters()``;
- gradients: the ``.grad`` of those parameters;
- optimizer state: every tensor in ``optimizer.state`` (AdamW's exp_avg and
  exp_avg_sq, SGD's momentum_buffer, ...);
- buffers: ``model.buffers()`` (batch-norm statistics, ...).

Each storage is counted once, by the address of its first byte and in the
first category it is found in: tied weights, views and DDP's gradient
buckets (gradients that are views into one bucket) are one storage each.
Only tensors on the sample's CUDA device count: a CPU copy, or a tensor of
another rank's GPU, is not this GPU's memory. A DTensor (FSDP2,
tensor-parallel) counts its local shard; FSDP1's flat parameters are
already local.

What it costs. Walking a model's parameters, buffers and optimizer state
touches every tensor, hundreds of them in a small transformer, at
Python's speed (bench/README.md, "Figures behind the code's constants").
The set of tensors changes rarely:
when the optimizer creates its state (its first step), when a module is
added or replaced. So the probe walks them only when a cheap signature
changed (how many parameter groups, parameters and state entries the
optimizer has), and at epoch marks; in between it reuses the sums. The
gradients are the exception: ``zero_grad(set_to_none=True)`` (PyTorch's
default) frees them and backward makes new ones, so at each sample the
probe reads each trainable parameter's ``.grad``: one attribute read a
parameter, its bytes known from the walk (a dense gradient has its
parameter's shape and dtype; one of another dtype is measured). Samples
are spaced by their own cost (see _probe), so on a CPU-bound job this runs
one step in tens.

Two facts are noted from inside the model's forward: a pre-hook that runs
at the next forward and removes itself (re-armed at every epoch start), so
steps pay nothing for it. It reads ``torch.is_autocast_enabled()``, and
whether the gradients exist as the forward starts: with
``zero_grad(set_to_none=True)`` before it they do not, so the forward's peak
(usually the step's) holds no gradients, and backward makes them as it frees
the activations; with ``set_to_none=False``, or gradient accumulation, they
are held all along. The arithmetic of the remedies depends on which.

Nothing here raises into the training code.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Tuple

# Categories, in the order a storage is attributed.
PARAMS, GRADS, STATE, BUFFERS = 0, 1, 2, 3


def _local(t: Any) -> Any:
    """The local shard of a DTensor; any other tensor as it is."""
    loc = getattr(t, "_local_tensor", None)
    return t if loc is None else loc


def _storage(t: Any) -> Tuple[int, int]:
    """(address, bytes) of the storage under t; (0, 0) if it has none."""
    try:
        s = t.untyped_storage()
        return int(s.data_ptr()), int(s.nbytes())
    except Exception:
        pass
    try:  # older torch
        return int(t.data_ptr()), int(t.numel()) * int(t.element_size())
    except Exception:
        return 0, 0


def _device_of(t: Any) -> int:
    """The CUDA device index of t, or -1 when it is not on a CUDA device."""
    try:
        if not t.is_cuda:
            return -1
        return int(t.get_device())
    except Exception:
        return -1


def _ref(obj: Any) -> Any:
    """A weak reference where the object allows one (the probe must not keep a
    deleted model alive), else a strong one."""
    if obj is None:
        return lambda: None
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class Figures:
    """One device's sums, as the torch line carries them."""

    __slots__ = ("params", "grads", "state", "buffers", "n_params", "n_trainable", "dtype")

    def __init__(self) -> None:
        self.params = self.grads = self.state = self.buffers = 0
        self.n_params = 0  # elements of the parameters on this device (local shards)
        self.n_trainable = 0  # of which require a gradient
        self.dtype = ""  # the parameters' dtype holding the most bytes


class Watch:
    """What memrec.watch was given, and the sums of the last walk."""

    def __init__(self, model: Any, optimizer: Any = None) -> None:
        self.model = _ref(model)
        self.optimizer = _ref(optimizer)
        self.has_optimizer = optimizer is not None
        self.sig: Optional[Tuple[int, ...]] = None
        self.walks = 0  # full walks so far (for tests and the cost benchmark)
        # From the last walk: per device, the fixed sums (params, state,
        # buffers); the storages already counted; the trainable parameters
        # with their device.
        self.fixed: Dict[int, Figures] = {}
        self.seen: Dict[int, set] = {}
        # (parameter, device, the bytes of a dense gradient of its dtype, its dtype)
        self.trainable: List[Tuple[Any, int, int, Any]] = []
        self.by_device: Dict[int, List[Tuple[Any, int, Any]]] = {}
        self.opt_name = _name(optimizer)
        self.state_keys = ""
        self.autocast: Optional[bool] = None
        self.grads_at_forward: Optional[bool] = None
        self.had_grads = False  # a sample has counted gradients: a backward ran
        self.hook = None
        self.arm_autocast()

    # ---- autocast ------------------------------------------------------

    def arm_autocast(self) -> None:
        """Notes at the next forward whether autocast is on, then unhooks."""
        m = self.model()
        if m is None or self.hook is not None:
            return
        reg = getattr(m, "register_forward_pre_hook", None)
        if reg is None:
            return

        def pre(module: Any, args: Any) -> None:
            try:
                import sys

                torch = sys.modules.get("torch")
                on = None
                if torch is not None:
                    try:
                        on = bool(torch.is_autocast_enabled("cuda"))
                    except TypeError:  # torch before 2.4 takes no device type
                        on = bool(torch.is_autocast_enabled())
                self.autocast = on
            except Exception:
                pass
            if not self.had_grads:
                return  # no backward yet: the first forward has no gradients whatever the loop does
            try:
                self.grads_at_forward = any(t[0].grad is not None for t in self.trainable)
            except Exception:
                pass
            try:
                if self.hook is not None:
                    self.hook.remove()
            except Exception:
                pass
            self.hook = None

        try:
            self.hook = reg(pre)
        except Exception:
            self.hook = None

    # ---- the walk ------------------------------------------------------

    def signature(self) -> Tuple[int, ...]:
        """What changes when the set of tensors can have changed."""
        opt = self.optimizer()
        if opt is None:
            return (-1,)
        try:
            groups = opt.param_groups
            return (len(groups), sum(len(g["params"]) for g in groups), len(opt.state))
        except Exception:
            return (-2,)

    def walk(self) -> None:
        """Sums parameters, optimizer state and buffers per device, each storage once."""
        self.walks += 1
        fixed: Dict[int, Figures] = {}
        seen: Dict[int, set] = {}
        trainable: List[Tuple[Any, int]] = []
        model, opt = self.model(), self.optimizer()

        def add(t: Any, cat: int) -> int:
            t = _local(t)
            d = _device_of(t)
            if d < 0:
                return -1
            addr, n = _storage(t)
            s = seen.setdefault(d, set())
            f = fixed.get(d)
            if f is None:
                f = fixed[d] = Figures()
            if addr in s or n <= 0:
                return d
            s.add(addr)
            if cat == PARAMS:
                f.params += n
            elif cat == STATE:
                f.state += n
            else:
                f.buffers += n
            return d

        dtype_bytes: Dict[int, Dict[str, int]] = {}
        params = []
        if model is not None:
            try:
                params = list(model.parameters())
            except Exception:
                params = []
        if opt is not None:  # parameters the optimizer has but the model does not list
            try:
                have = {id(p) for p in params}
                for g in opt.param_groups:
                    for p in g["params"]:
                        if id(p) not in have:
                            have.add(id(p))
                            params.append(p)
            except Exception:
                pass
        for p in params:
            d = add(p, PARAMS)
            if d < 0:
                continue
            loc = _local(p)
            try:
                n = int(loc.numel())
                f = fixed[d]
                f.n_params += n
                if getattr(p, "requires_grad", False):
                    f.n_trainable += n
                    trainable.append((p, d, n * int(loc.element_size()), loc.dtype))
                by = dtype_bytes.setdefault(d, {})
                name = str(loc.dtype).replace("torch.", "")
                by[name] = by.get(name, 0) + n * int(loc.element_size())
            except Exception:
                pass
        keys: Dict[str, int] = {}
        if opt is not None:
            try:
                for st in list(opt.state.values()):
                    for k, v in list(st.items()):
                        if hasattr(v, "untyped_storage") or hasattr(v, "data_ptr"):
                            if add(v, STATE) >= 0:
                                keys[k] = keys.get(k, 0) + 1
            except Exception:
                pass
        if model is not None:
            try:
                for b in model.buffers():
                    add(b, BUFFERS)
            except Exception:
                pass
        for d, by in dtype_bytes.items():
            if by:
                fixed[d].dtype = max(by.items(), key=lambda kv: kv[1])[0]
        self.fixed, self.seen, self.trainable = fixed, seen, trainable
        # A dense gradient has its parameter's shape (its local shard's, for
        # a DTensor) and, almost always, its dtype: its bytes are known from
        # the walk. Gradients never share elements (a tied weight is one
        # parameter with one .grad; DDP's bucket views cover disjoint parts
        # of a bucket), so their sum counts each byte once without looking
        # up storages, which would cost every sampled step.
        self.by_device = {}
        for p, d, nb, dt in trainable:
            self.by_device.setdefault(d, []).append((p, nb, dt))
        self.state_keys = ",".join(sorted(keys))
        self.sig = self.signature()

    def refresh(self, force: bool = False) -> None:
        """Walks again if the set of tensors can have changed (or force)."""
        if force or self.sig is None or self.signature() != self.sig:
            self.walk()

    def figures(self) -> Dict[int, Figures]:
        """Per CUDA device, the four sums now. The gradients are read now;
        the rest comes from the last walk."""
        self.refresh()
        out: Dict[int, Figures] = {}
        grads: Dict[int, int] = {}
        for d, group in self.by_device.items():
            n = 0
            for p, nb, dt in group:
                g = p.grad
                if g is None:
                    continue
                if g.dtype is not dt:
                    nb = _dense_bytes(g)
                n += nb
            if n:
                grads[d] = n
        if grads:
            self.had_grads = True
        for d, f in self.fixed.items():
            o = Figures()
            o.params, o.state, o.buffers = f.params, f.state, f.buffers
            o.n_params, o.n_trainable, o.dtype = f.n_params, f.n_trainable, f.dtype
            o.grads = grads.get(d, 0)
            out[d] = o
        return out

    def fields(self, f: Figures) -> str:
        """The budget's fields of one device's torch line (after its ooms)."""
        tail = ',"params_bytes":%d,"grads_bytes":%d,"optimizer_bytes":%d,"buffers_bytes":%d,"params":%d,"trainable":%d' % (
            f.params, f.grads, f.state, f.buffers, f.n_params, f.n_trainable)
        if self.autocast is not None:
            tail += ',"autocast":%s' % ("true" if self.autocast else "false")
        if self.grads_at_forward is not None:
            tail += ',"grads_at_forward":%s' % ("true" if self.grads_at_forward else "false")
        if self.has_optimizer:
            tail += ',"optimizer":"%s"' % _plain(self.opt_name)
            if self.state_keys:
                tail += ',"optimizer_state":"%s"' % _plain(self.state_keys)
        if f.dtype:
            tail += ',"dtype":"%s"' % _plain(f.dtype)
        return tail

    def blocks(self) -> List[Tuple[int, int, int, str]]:
        """(address, bytes, category, label) of every storage counted, for the
        site summaries: a block that holds one of these addresses holds that
        category's tensor."""
        out: List[Tuple[int, int, int, str]] = []
        model, opt = self.model(), self.optimizer()
        seen: set = set()

        def put(t: Any, cat: int, label: str) -> None:
            t = _local(t)
            if _device_of(t) < 0:
                return
            addr, n = _storage(t)
            if n > 0 and addr not in seen:
                seen.add(addr)
                out.append((addr, n, cat, label))

        try:
            for p in (model.parameters() if model is not None else ()):
                put(p, PARAMS, "")
            for t in self.trainable:
                p = t[0]
                if p.grad is not None:
                    put(p.grad, GRADS, "")
            if opt is not None:
                for st in list(opt.state.values()):
                    for k, v in list(st.items()):
                        if hasattr(v, "untyped_storage"):
                            put(v, STATE, "%s %s" % (self.opt_name, k))
            for b in (model.buffers() if model is not None else ()):
                put(b, BUFFERS, "")
        except Exception:
            pass
        return out


def _dense_bytes(g: Any) -> int:
    """The bytes of a gradient whose dtype is not its parameter's."""
    try:
        loc = _local(g)
        return int(loc.numel()) * int(loc.element_size())
    except Exception:
        return 0


def _name(opt: Any) -> str:
    """The optimizer's class name, under the wrappers of Hugging Face's
    Accelerate (AcceleratedOptimizer.optimizer) and Lightning
    (LightningOptimizer._optimizer)."""
    if opt is None:
        return ""
    n = getattr(opt, "name", None)
    if isinstance(n, str):
        return n
    for _ in range(4):
        inner = getattr(opt, "optimizer", None) or getattr(opt, "_optimizer", None)
        if inner is None or inner is opt or not hasattr(inner, "param_groups"):
            break
        opt = inner
    return type(opt).__name__


def _plain(s: str) -> str:
    """s without the characters a JSON string would need escaped."""
    return "".join(c for c in str(s) if c not in '"\\' and " " <= c <= "~")[:200]
