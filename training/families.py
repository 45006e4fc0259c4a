# SPDX-License-Identifier: Apache-2.0
"""The forward passes of the three hybrid families written in torch, for training the model
organisms. Module attribute names mirror the Hugging Face checkpoint layout, so
`state_dict()` keys are exactly the checkpoint's tensor names (docs/organisms.md).

Prefill of a fresh sequence only (zero initial states): Gated DeltaNet in its single-chunk
form (one unit-lower-triangular solve over the whole sequence), Mamba-2 in its quadratic SSD
form, causal softmax attention. These equal the chunked / recurrent forms that hylens runs up
to float rounding; `check_golden.py` checks them against the Hugging Face golden logits.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def _lin(i, o, bias=False):
    return nn.Linear(i, o, bias=bias)


class RMSNorm(nn.Module):
    """RMSNorm_std (w * x * r) or, with one_plus, Qwen's zero-centred (1 + w) * x * r."""

    def __init__(self, d, eps, one_plus=False):
        super().__init__()
        self.eps, self.one_plus = eps, one_plus
        self.weight = nn.Parameter(torch.zeros(d) if one_plus else torch.ones(d))

    def forward(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * (1.0 + self.weight) if self.one_plus else y * self.weight


class PlainWeight(nn.Module):
    """A module holding just `.weight` (gated norms whose math lives in the caller)."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))


def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def causal_conv(conv, u):
    """u [B, T, C] -> depthwise causal conv (HF semantics, zero left padding) [B, T, C]."""
    T = u.shape[1]
    y = F.conv1d(u.transpose(1, 2), conv.weight, conv.bias, padding=conv.weight.shape[-1] - 1, groups=u.shape[2])
    return y[..., :T].transpose(1, 2)


def rope_tables(T, R, theta, dtype):
    """cos/sin [T, R/2], angles computed in float32 as hylens and HF do."""
    j = torch.arange(0, R, 2, dtype=torch.float32)
    f = 1.0 / (torch.tensor(theta, dtype=torch.float32) ** (j / float(R)))
    ang = torch.arange(T, dtype=torch.float32)[:, None] * f[None, :]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def apply_rope(x, cos, sin, R):
    """x [B, H, T, hd]; NeoX half rotation of the first R components."""
    if R == 0:
        return x
    h = R // 2
    x1, x2, rest = x[..., :h], x[..., h:R], x[..., R:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def causal_attention(q, k, v, scale):
    """q [B, Hq, T, d], k/v [B, Hkv, T, d] -> [B, T, Hq*d]."""
    B, Hq, T, d = q.shape
    rep = Hq // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    a = (q @ k.transpose(-1, -2)) * scale
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    a = a.masked_fill(~mask, float("-inf"))
    o = torch.softmax(a, dim=-1) @ v
    return o.transpose(1, 2).reshape(B, T, Hq * d)


# ---------------------------------------------------------------------------------------
# Gated DeltaNet core (single chunk, zero initial state)

def unit_lower_inverse(A):
    """(I + A)^-1 for strictly lower-triangular A [..., T, T], as the product
    (I - A)(I + A^2)(I + A^4)... (exact because A is nilpotent: A^T = 0). Batched matmuls only:
    torch's CPU solve_triangular loops over the batch and dominated the training step."""
    T = A.shape[-1]
    P = -A
    inv = torch.eye(T, dtype=A.dtype) + P
    span = 2
    while span < T:
        P = P @ P
        inv = inv + inv @ P
        span *= 2
    return inv


def gated_delta_rule(q, k, v, g, beta, chunk=16):
    """q,k [B,H,T,dk] (L2-normalised, q scaled), v [B,H,T,dv], g,beta [B,H,T] -> o [B,H,T,dv].
    The chunked form of docs/organisms.md (architectures: gated delta rule, chunked), with a short
    chunk so that the in-chunk inverse is cheap; zero initial state."""
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    n = (T + chunk - 1) // chunk
    pad = n * chunk - T
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    q, k, v = (x.reshape(B, H, n, chunk, x.shape[-1]) for x in (q, k, v))
    g, beta = g.reshape(B, H, n, chunk), beta.reshape(B, H, n, chunk)
    gam = torch.cumsum(g, dim=-1)
    diff = gam[..., :, None] - gam[..., None, :]
    strict = torch.ones(chunk, chunk, dtype=torch.bool).tril(-1)
    incl = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    A = beta[..., :, None] * (k @ k.transpose(-1, -2)) * torch.exp(diff.masked_fill(~strict, float("-inf")))
    Tm = unit_lower_inverse(A)
    U = Tm @ (beta[..., None] * v)
    W = Tm @ ((beta * torch.exp(gam))[..., None] * k)
    M = (q @ k.transpose(-1, -2)) * torch.exp(diff.masked_fill(~incl, float("-inf")))
    S = torch.zeros(B, H, dk, dv, dtype=q.dtype)
    outs = []
    for c in range(n):
        Vn = U[:, :, c] - W[:, :, c] @ S
        outs.append((torch.exp(gam[:, :, c])[..., None] * q[:, :, c]) @ S + M[:, :, c] @ Vn)
        last = gam[:, :, c, -1]
        S = torch.exp(last)[..., None, None] * S + \
            (torch.exp(last[..., None] - gam[:, :, c])[..., None] * k[:, :, c]).transpose(-1, -2) @ Vn
    return torch.cat(outs, dim=2)[:, :, :T]


def l2norm(x):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6)


# ---------------------------------------------------------------------------------------
# Mamba-2 SSD core (quadratic form, zero initial state)

def ssd(x, dt, A, Bm, Cm, D):
    """x [B,T,H,P], dt [B,T,H] (after softplus), A [H] (negative), Bm/Cm [B,T,G,N] -> y [B,T,H,P]."""
    Bsz, T, H, P = x.shape
    G = Bm.shape[2]
    a = (dt * A).transpose(1, 2)  # [B,H,T]
    cs = torch.cumsum(a, dim=-1)
    incl = torch.ones(T, T, dtype=torch.bool).tril()
    L = torch.exp((cs[..., :, None] - cs[..., None, :]).masked_fill(~incl, float("-inf")))  # [B,H,T,T]
    CB = torch.einsum("blgn,bsgn->bgls", Cm, Bm).repeat_interleave(H // G, dim=1)  # [B,H,T,T]
    xt = (x * dt[..., None]).transpose(1, 2)  # [B,H,T,P]
    y = (CB * L) @ xt
    return y.transpose(1, 2) + D[None, None, :, None] * x


def inv_softplus(y):
    return y + torch.log(-torch.expm1(-y))


def init_dt_bias(n, gen):
    dt = torch.exp(torch.rand(n, generator=gen) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    return inv_softplus(dt)


# ---------------------------------------------------------------------------------------
# Family A: Qwen3.5 (qwen3_5_text)

class QwenGDN(nn.Module):
    def __init__(self, c, gen):
        super().__init__()
        H = c["hidden_size"]
        self.Hk, self.Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.eps = c["rms_norm_eps"]
        Kd, Vd = self.Hk * self.dk, self.Hv * self.dv
        Cc = 2 * Kd + Vd
        self.in_proj_qkv = _lin(H, Cc)
        self.in_proj_z = _lin(H, Vd)
        self.in_proj_b = _lin(H, self.Hv)
        self.in_proj_a = _lin(H, self.Hv)
        self.conv1d = nn.Conv1d(Cc, Cc, c["linear_conv_kernel_dim"], groups=Cc, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.Hv))
        self.A_log = nn.Parameter(torch.log(torch.rand(self.Hv, generator=gen) * 15 + 1))
        self.norm = PlainWeight(self.dv)
        self.out_proj = _lin(Vd, H)

    def forward(self, x):
        B, T, _ = x.shape
        Kd = self.Hk * self.dk
        w = F.silu(causal_conv(self.conv1d, self.in_proj_qkv(x)))
        q = w[..., :Kd].reshape(B, T, self.Hk, self.dk).transpose(1, 2)
        k = w[..., Kd:2 * Kd].reshape(B, T, self.Hk, self.dk).transpose(1, 2)
        v = w[..., 2 * Kd:].reshape(B, T, self.Hv, self.dv).transpose(1, 2)
        r = self.Hv // self.Hk
        q = (l2norm(q) * self.dk ** -0.5).repeat_interleave(r, dim=1)
        k = l2norm(k).repeat_interleave(r, dim=1)
        beta = torch.sigmoid(self.in_proj_b(x)).transpose(1, 2)
        g = (-torch.exp(self.A_log) * F.softplus(self.in_proj_a(x) + self.dt_bias)).transpose(1, 2)
        o = gated_delta_rule(q, k, v, g, beta).transpose(1, 2)  # [B,T,Hv,dv]
        z = self.in_proj_z(x).reshape(B, T, self.Hv, self.dv)
        o = rms(o, self.eps) * self.norm.weight * F.silu(z)
        return self.out_proj(o.reshape(B, T, -1))


class QwenAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.Hq, self.Hkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        rp = c["rope_parameters"]
        self.theta = rp["rope_theta"]
        self.R = int(self.hd * rp.get("partial_rotary_factor", 1.0))
        self.q_proj = _lin(H, 2 * self.Hq * self.hd)
        self.k_proj = _lin(H, self.Hkv * self.hd)
        self.v_proj = _lin(H, self.Hkv * self.hd)
        self.o_proj = _lin(self.Hq * self.hd, H)
        self.q_norm = RMSNorm(self.hd, c["rms_norm_eps"], one_plus=True)
        self.k_norm = RMSNorm(self.hd, c["rms_norm_eps"], one_plus=True)

    def forward(self, x):
        B, T, _ = x.shape
        pq = self.q_proj(x).reshape(B, T, self.Hq, 2 * self.hd)
        q, gate = pq[..., :self.hd], pq[..., self.hd:]
        q = self.q_norm(q).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).reshape(B, T, self.Hkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).reshape(B, T, self.Hkv, self.hd).transpose(1, 2)
        cos, sin = rope_tables(T, self.R, self.theta, x.dtype)
        q, k = apply_rope(q, cos, sin, self.R), apply_rope(k, cos, sin, self.R)
        o = causal_attention(q, k, v, self.hd ** -0.5)
        return self.o_proj(o * torch.sigmoid(gate.reshape(B, T, -1)))


class SwiGLU(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = _lin(H, I), _lin(H, I), _lin(I, H)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class QwenLayer(nn.Module):
    def __init__(self, c, kind, gen):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.kind = kind
        self.input_layernorm = RMSNorm(H, eps, one_plus=True)
        self.post_attention_layernorm = RMSNorm(H, eps, one_plus=True)
        if kind == "full_attention":
            self.self_attn = QwenAttention(c)
        else:
            self.linear_attn = QwenGDN(c, gen)
        self.mlp = SwiGLU(H, c["intermediate_size"])

    def forward(self, h):
        x = self.input_layernorm(h)
        h = h + (self.self_attn(x) if self.kind == "full_attention" else self.linear_attn(x))
        return h + self.mlp(self.post_attention_layernorm(h))


# ---------------------------------------------------------------------------------------
# Mamba-2 mixer shared by Granite and Falcon-H1

class Mamba2(nn.Module):
    def __init__(self, H, Di, Hm, P, G, N, Kc, conv_bias, proj_bias, out_bias, norm, gen):
        super().__init__()
        self.Di, self.Hm, self.P, self.G, self.N = Di, Hm, P, G, N
        self.in_proj = _lin(H, 2 * Di + 2 * G * N + Hm, bias=proj_bias)
        Cm = Di + 2 * G * N
        self.conv1d = nn.Conv1d(Cm, Cm, Kc, groups=Cm, bias=conv_bias)
        self.dt_bias = nn.Parameter(init_dt_bias(Hm, gen))
        self.A_log = nn.Parameter(torch.log(torch.rand(Hm, generator=gen) * 15 + 1))
        self.D = nn.Parameter(torch.ones(Hm))
        if norm:
            self.norm = PlainWeight(Di)
        self.out_proj = _lin(Di, H, bias=out_bias)
        self.dt_limit = None

    def core(self, zeta):
        """zeta: in_proj output (after any multipliers) -> (y [B,T,Di] before gating, z)."""
        B, T, _ = zeta.shape
        Di, GN = self.Di, self.G * self.N
        z, xi, dt = zeta[..., :Di], zeta[..., Di:2 * Di + 2 * GN], zeta[..., 2 * Di + 2 * GN:]
        xi = F.silu(causal_conv(self.conv1d, xi))
        xs = xi[..., :Di].reshape(B, T, self.Hm, self.P)
        Bm = xi[..., Di:Di + GN].reshape(B, T, self.G, self.N)
        Cm = xi[..., Di + GN:].reshape(B, T, self.G, self.N)
        dt = F.softplus(dt + self.dt_bias)
        if self.dt_limit is not None:
            dt = dt.clamp(self.dt_limit[0], self.dt_limit[1])
        y = ssd(xs, dt, -torch.exp(self.A_log), Bm, Cm, self.D)
        return y.reshape(B, T, Di), z


# ---------------------------------------------------------------------------------------
# Family B: Granite 4.0 H (granitemoehybrid, dense)

class GraniteAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.Hq, self.Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = H // self.Hq
        self.scale = c["attention_multiplier"]
        self.rope = c.get("position_embedding_type") == "rope"
        self.theta = c.get("rope_theta", 10000.0)
        b = c.get("attention_bias", False)
        self.q_proj = _lin(H, self.Hq * self.hd, b)
        self.k_proj = _lin(H, self.Hkv * self.hd, b)
        self.v_proj = _lin(H, self.Hkv * self.hd, b)
        self.o_proj = _lin(self.Hq * self.hd, H, b)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).reshape(B, T, self.Hq, self.hd).transpose(1, 2)
        k = self.k_proj(x).reshape(B, T, self.Hkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).reshape(B, T, self.Hkv, self.hd).transpose(1, 2)
        if self.rope:
            cos, sin = rope_tables(T, self.hd, self.theta, x.dtype)
            q, k = apply_rope(q, cos, sin, self.hd), apply_rope(k, cos, sin, self.hd)
        return self.o_proj(causal_attention(q, k, v, self.scale))


class GraniteMamba(Mamba2):
    def __init__(self, c, gen):
        H = c["hidden_size"]
        Hm = c["mamba_n_heads"]
        Di = c["mamba_expand"] * H
        P = c.get("mamba_d_head", "auto")
        P = Di // Hm if P == "auto" else P
        super().__init__(H, Di, Hm, P, c["mamba_n_groups"], c["mamba_d_state"], c["mamba_d_conv"],
                         c.get("mamba_conv_bias", True), c.get("mamba_proj_bias", False),
                         c.get("mamba_proj_bias", False), True, gen)
        self.eps = c["rms_norm_eps"]
        lim = c.get("time_step_limit")
        if lim is not None and (lim[0] > 0 or lim[1] != float("inf")):
            self.dt_limit = (float(lim[0]), float(lim[1]))

    def forward(self, x):
        y, z = self.core(self.in_proj(x))
        u = y * F.silu(z)  # gate, then norm over the whole Di (GNorm_gbn)
        return self.out_proj(rms(u, self.eps) * self.norm.weight)


class GraniteSharedMLP(nn.Module):
    def __init__(self, H, S):
        super().__init__()
        self.S = S
        self.input_linear = _lin(H, 2 * S)
        self.output_linear = _lin(S, H)

    def forward(self, y):
        u = self.input_linear(y)
        return self.output_linear(F.silu(u[..., :self.S]) * u[..., self.S:])


class GraniteLayer(nn.Module):
    def __init__(self, c, kind, gen):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.kind, self.res = kind, c["residual_multiplier"]
        self.input_layernorm = RMSNorm(H, eps)
        self.post_attention_layernorm = RMSNorm(H, eps)
        if kind == "attention":
            self.self_attn = GraniteAttention(c)
        else:
            self.mamba = GraniteMamba(c, gen)
        self.shared_mlp = GraniteSharedMLP(H, c["shared_intermediate_size"])

    def forward(self, h):
        x = self.input_layernorm(h)
        h = h + self.res * (self.self_attn(x) if self.kind == "attention" else self.mamba(x))
        return h + self.res * self.shared_mlp(self.post_attention_layernorm(h))


# ---------------------------------------------------------------------------------------
# Family C: Falcon-H1

class FalconAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.Hq, self.Hkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.key_mult = c["key_multiplier"]
        self.theta = c["rope_theta"]
        b = c.get("attention_bias", False)
        self.q_proj = _lin(H, self.Hq * self.hd, b)
        self.k_proj = _lin(H, self.Hkv * self.hd, b)
        self.v_proj = _lin(H, self.Hkv * self.hd, b)
        self.o_proj = _lin(self.Hq * self.hd, H, b)

    def forward(self, u):
        B, T, _ = u.shape
        q = self.q_proj(u).reshape(B, T, self.Hq, self.hd).transpose(1, 2)
        k = (self.key_mult * self.k_proj(u)).reshape(B, T, self.Hkv, self.hd).transpose(1, 2)
        v = self.v_proj(u).reshape(B, T, self.Hkv, self.hd).transpose(1, 2)
        cos, sin = rope_tables(T, self.hd, self.theta, u.dtype)
        q, k = apply_rope(q, cos, sin, self.hd), apply_rope(k, cos, sin, self.hd)
        return self.o_proj(causal_attention(q, k, v, self.hd ** -0.5))


class FalconMamba(Mamba2):
    def __init__(self, c, gen):
        H = c["hidden_size"]
        Hm = c["mamba_n_heads"]
        Ds = c.get("mamba_d_ssm") or c.get("mamba_expand", 2) * H
        P = c.get("mamba_d_head", "auto")
        P = Ds // Hm if P == "auto" else P
        self_norm = c.get("mamba_rms_norm", False)
        super().__init__(H, Ds, Hm, P, c["mamba_n_groups"], c["mamba_d_state"], c["mamba_d_conv"],
                         c.get("mamba_conv_bias", True), c.get("mamba_proj_bias", False),
                         c.get("projectors_bias", False), self_norm, gen)
        self.use_norm, self.before_gate = self_norm, c.get("mamba_norm_before_gate", True)
        self.eps = c["rms_norm_eps"]
        self.in_mult = c["ssm_in_multiplier"]
        m = c["ssm_multipliers"]
        GN = self.G * self.N
        mu = torch.cat([torch.full((Ds,), m[0]), torch.full((Ds,), m[1]), torch.full((GN,), m[2]),
                        torch.full((GN,), m[3]), torch.full((Hm,), m[4])])
        self.register_buffer("mup", mu, persistent=False)

    def forward(self, x):
        y, z = self.core(self.in_proj(self.in_mult * x) * self.mup.to(x.dtype))
        if not self.use_norm:
            y = y * F.silu(z)
        else:
            B, T, Ds = y.shape
            w = self.norm.weight.reshape(self.G, Ds // self.G)
            yg, zg = y.reshape(B, T, self.G, -1), z.reshape(B, T, self.G, -1)
            if self.before_gate:
                y = (rms(yg, self.eps) * w * F.silu(zg)).reshape(B, T, Ds)
            else:
                y = (rms(yg * F.silu(zg), self.eps) * w).reshape(B, T, Ds)
        return self.out_proj(y)


class FalconMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, I, b = c["hidden_size"], c["intermediate_size"], c.get("mlp_bias", False)
        self.gm, self.dm = c["mlp_multipliers"]
        self.gate_proj, self.up_proj, self.down_proj = _lin(H, I, b), _lin(H, I, b), _lin(I, H, b)

    def forward(self, y):
        return self.dm * self.down_proj(self.up_proj(y) * F.silu(self.gm * self.gate_proj(y)))


class FalconLayer(nn.Module):
    def __init__(self, c, kind, gen):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.c = c
        self.input_layernorm = RMSNorm(H, eps)
        self.pre_ff_layernorm = RMSNorm(H, eps)
        self.mamba = FalconMamba(c, gen)
        self.self_attn = FalconAttention(c)
        self.feed_forward = FalconMLP(c)

    def forward(self, h):
        c = self.c
        x = self.input_layernorm(h)
        m = c["ssm_out_multiplier"] * self.mamba(x)
        a = c["attention_out_multiplier"] * self.self_attn(c["attention_in_multiplier"] * x)
        h = h + m + a
        return h + self.feed_forward(self.pre_ff_layernorm(h))


# ---------------------------------------------------------------------------------------

class Backbone(nn.Module):
    def __init__(self, family, c, gen):
        super().__init__()
        H, V, eps = c["hidden_size"], c["vocab_size"], c["rms_norm_eps"]
        self.embed_tokens = nn.Embedding(V, H)
        L = c["num_hidden_layers"]
        kinds = ["hybrid"] * L if family == "falcon_h1" else c.get("layer_types", ["mamba"] * L)
        Layer = {"qwen35": QwenLayer, "granite_h": GraniteLayer, "falcon_h1": FalconLayer}[family]
        self.layers = nn.ModuleList([Layer(c, k, gen) for k in kinds])
        if family == "falcon_h1":
            self.final_layernorm = RMSNorm(H, eps)
        else:
            self.norm = RMSNorm(H, eps, one_plus=(family == "qwen35"))


class CausalLM(nn.Module):
    """The family's causal LM. `text_config(c)` is the decoder config (Qwen's text_config)."""

    def __init__(self, family, cfg, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.family = family
        c = cfg["text_config"] if "text_config" in cfg else cfg
        self.c = c
        self.tied = bool(cfg.get("tie_word_embeddings", c.get("tie_word_embeddings", False)))
        self.model = Backbone(family, c, gen)
        if not self.tied:
            self.lm_head = _lin(c["hidden_size"], c["vocab_size"])

    def hidden(self, ids):
        c = self.c
        h = self.model.embed_tokens(ids)
        if self.family != "qwen35":
            h = h * c.get("embedding_multiplier", 1.0)
        for layer in self.model.layers:
            h = layer(h)
        return self.model.final_layernorm(h) if self.family == "falcon_h1" else self.model.norm(h)

    def forward(self, ids):
        out = self.hidden(ids)
        W = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        logits = out @ W.t()
        if self.family == "granite_h":
            logits = logits / self.c.get("logits_scaling", 1.0)
        elif self.family == "falcon_h1":
            logits = logits * self.c.get("lm_head_multiplier", 1.0)
        return logits
