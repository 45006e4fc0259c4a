#pragma once
// Recurrent-state patching between caches of one model: copy the SSM state (and optionally
// the conv window) of chosen recurrent layers from a donor cache into a host cache, and the
// state after a prefix of a prompt (state_after). The K/V of the host is never touched.

#include <algorithm>  // std::copy
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <type_traits>  // std::is_same_v, std::remove_cvref_t
#include <vector>     // std::vector

#include "../cache/parts.hpp"
#include "../core/error.hpp"
#include "../core/indices.hpp"
#include "../stack/tokens.hpp"

namespace hylens {

/// Copies the recurrent part of `layers` from `donor` into `host` (both caches of the same
/// stack type): the SSM state, and the conv window too when include_conv; a stitched block's
/// donor layers' parts too. Layers without a recurrent part are a ShapeError; so are caches of
/// different batch or shape, and a cache a failed forward left part-updated (torn).
template <class Cache>
void copy_recurrent(Cache& host, const Cache& donor, const std::vector<LayerIndex>& layers, bool include_conv = true) {
    if constexpr (requires { host.check_usable("copy_recurrent"); }) {
        host.check_usable("copy_recurrent");
        donor.check_usable("copy_recurrent");
    }
    check<ShapeError>(host.order() == donor.order() && host.batch() == donor.batch(),
                      "[copy_recurrent] the caches belong to different layer layouts or batch sizes");
    for (LayerIndex l : layers)
        check<ShapeError>(l < host.num_layers(), "[copy_recurrent] layer ", layer_name(l), " out of ", host.num_layers());
    for (LayerIndex l : layers) {
        host.visit(l, [&](auto& hc) {
            donor.visit(l, [&](const auto& dc) {
                bool found = false;
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(hc)>, std::remove_cvref_t<decltype(dc)>>)
                    for_each_recurrent_pair(hc, dc, [&](RecurrentCache& h, const RecurrentCache& d) {
                        found = true;
                        check<ShapeError>(h.state_size() == d.state_size() && h.conv_channels() == d.conv_channels() &&
                                              h.conv_width() == d.conv_width(),
                                          "[copy_recurrent] layer ", l, ": state shapes differ");
                        for (std::size_t b = 0; b < h.batch(); ++b) {
                            std::copy(d.state(b), d.state(b) + d.state_size(), h.state(b));
                            if (include_conv) std::copy(d.conv(b), d.conv(b) + d.conv_channels() * d.conv_width(), h.conv(b));
                        }
                    });
                check<ShapeError>(found, "[copy_recurrent] layer ", l, " has no recurrent state");
            });
        });
    }
}

/// The cache after consuming ids[0..t] (inclusive) of a fresh run: state_after(l, t)
/// is recurrent_part of layer l of the result.
template <class Model>
typename Model::cache_type state_after(const Model& model, const TokenBatch& ids, std::size_t t) {
    check<ShapeError>(t < ids.T(), "[state_after] position ", t, " is outside a prompt of ", ids.T(), " tokens");
    TokenBatch prefix;
    prefix.batch = ids.batch;
    for (std::size_t b = 0; b < ids.batch; ++b)
        for (std::size_t i = 0; i <= t; ++i) prefix.ids.push_back(ids.at(b, i));
    return model.prefill(prefix);
}

}  // namespace hylens
