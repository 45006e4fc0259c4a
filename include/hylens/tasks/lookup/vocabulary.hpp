#pragma once
// Paper A's dictionary vocabularies (protocols.md §A.4.1) and their per-tokenizer filters.
//
//   in-family:    22 keys (fruit and vegetables) and 20 colour/material values, used when one
//                 tokenizer reads the prompts;
//   cross-family: 167 keys (fruit, animals, furniture, instruments, places, weather, jobs,
//                 vehicles, food, clothes, tools) and 30 values (the in-family values without
//                 "olive", plus silver pink purple brown glass sand salt ash ruby mint tan), used
//                 when two tokenizers must read the same text.
// Filters: a value is kept only if it is one token both bare and after a space (the answer is
// the bare word after "**", the dictionary writes it after "=" or a space); a key only if it is
// one token after a space (how the question writes it). Cross-family words must pass in every
// tokenizer given. Keys that are also values are dropped. The cross-family keys are split in
// halves K_fit / K_test by a seeded shuffle (maps are fitted on K_fit dictionaries and tested on
// K_test ones).

#include <array>        // std::array
#include <cstddef>      // std::ptrdiff_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/rng.hpp"
#include "hylens/text/tokenizer.hpp"

namespace hylens::tasks::lookup {

inline constexpr std::array<std::string_view, 22> in_family_keys = {
    "apple", "banana", "cherry", "date", "elder", "fig", "grape", "lemon", "mango", "peach", "pear", "plum",
    "berry", "onion", "garlic", "ginger", "pepper", "tomato", "carrot", "potato", "walnut", "almond"};

inline constexpr std::array<std::string_view, 20> in_family_values = {
    "red", "blue", "green", "gold", "gray", "black", "white", "orange", "yellow", "amber", "rose", "lime",
    "olive", "azure", "steel", "ice", "fire", "stone", "wood", "iron"};

inline constexpr std::array<std::string_view, 167> cross_family_keys = {
    "apple", "banana", "cherry", "date", "elder", "fig", "grape", "lemon", "mango", "peach", "pear", "plum",
    "berry", "onion", "garlic", "ginger", "pepper", "tomato", "carrot", "potato", "walnut", "almond",
    "lion", "tiger", "bear", "wolf", "fox", "deer", "horse", "sheep", "goat", "cow", "pig", "dog", "cat",
    "mouse", "rabbit", "eagle", "hawk", "owl", "duck", "goose", "crow", "snake", "frog", "fish", "shark",
    "whale", "seal", "chair", "table", "desk", "lamp", "door", "window", "bed", "sofa", "clock", "mirror",
    "bottle", "cup", "plate", "bowl", "spoon", "fork", "knife", "pen", "book", "paper", "phone", "camera",
    "radio", "piano", "guitar", "drum", "violin", "river", "lake", "ocean", "mountain", "hill", "forest",
    "desert", "island", "valley", "beach", "cloud", "rain", "snow", "storm", "wind", "moon", "star",
    "planet", "sun", "sky", "king", "queen", "prince", "doctor", "nurse", "teacher", "farmer", "pilot",
    "captain", "soldier", "judge", "lawyer", "artist", "singer", "dancer", "writer", "train", "plane",
    "boat", "ship", "truck", "car", "bus", "bike", "rocket", "wagon", "bread", "cheese", "butter", "milk",
    "honey", "sugar", "rice", "pasta", "soup", "cake", "pie", "cookie", "candy", "coffee", "tea", "juice",
    "wine", "beer", "water", "shirt", "dress", "coat", "hat", "shoe", "sock", "glove", "scarf", "belt",
    "ring", "watch", "hammer", "nail", "brush", "rope", "chain", "wheel", "box", "bag", "basket", "key",
    "lock", "bell", "flag", "map", "coin"};

inline constexpr std::array<std::string_view, 30> cross_family_values = {
    "red", "blue", "green", "gold", "gray", "black", "white", "orange", "yellow", "amber", "rose", "lime",
    "azure", "steel", "ice", "fire", "stone", "wood", "iron", "silver", "pink", "purple", "brown", "glass",
    "sand", "salt", "ash", "ruby", "mint", "tan"};

/// The keys and values a generator draws from, after the filters.
struct Vocabulary {
    std::vector<std::string> keys, values;
};

/// True if `word` is one token in `tok` after a space, and (when `bare` too) without one.
inline bool single_token_word(const Tokenizer& tok, std::string_view word, bool bare) {
    return tok.is_single_token(word, true) && (!bare || tok.is_single_token(word, false));
}

/// Keeps keys that pass the key filter and are no value, and values that pass the value filter,
/// in every tokenizer of `toks`; the order of the lists is kept.
template <std::size_t NK, std::size_t NV>
Vocabulary filter_vocabulary(const std::array<std::string_view, NK>& keys, const std::array<std::string_view, NV>& values,
                             const std::vector<const Tokenizer*>& toks, bool keys_bare) {
    check(!toks.empty(), "[lookup::vocabulary] no tokenizer to filter the words with");
    Vocabulary v;
    for (std::string_view w : values) {
        bool ok = true;
        for (const Tokenizer* t : toks) ok = ok && single_token_word(*t, w, true);
        if (ok) v.values.emplace_back(w);
    }
    for (std::string_view w : keys) {
        bool ok = true;
        for (const Tokenizer* t : toks) ok = ok && single_token_word(*t, w, keys_bare);
        for (std::string_view x : values) ok = ok && x != w;
        if (ok) v.keys.emplace_back(w);
    }
    return v;
}

/// The in-family vocabulary of one tokenizer (§A.4.1).
inline Vocabulary in_family_vocabulary(const Tokenizer& tok) {
    return filter_vocabulary(in_family_keys, in_family_values, {&tok}, false);
}

/// The cross-family vocabulary of the tokenizers that must all read the text: every word one
/// token with and without a leading space in each of them.
inline Vocabulary cross_family_vocabulary(const std::vector<const Tokenizer*>& toks) {
    return filter_vocabulary(cross_family_keys, cross_family_values, toks, true);
}

/// K_fit / K_test: the keys shuffled with `seed` and cut in half (K_fit the first half, the
/// smaller one when the count is odd).
struct KeySplit {
    std::vector<std::string> fit, test;
};
inline KeySplit key_split(std::vector<std::string> keys, std::uint64_t seed) {
    TaskRng rng(seed, "lookup:key_split", 0);
    rng.shuffle(keys);
    const std::size_t half = keys.size() / 2;
    return {std::vector<std::string>(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(half)),
            std::vector<std::string>(keys.begin() + static_cast<std::ptrdiff_t>(half), keys.end())};
}

}  // namespace hylens::tasks::lookup
