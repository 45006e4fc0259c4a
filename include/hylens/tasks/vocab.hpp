#pragma once
// The tasks' closed vocabularies: small sets of common English words and sentences, so a
// model of a few hundred thousand parameters can learn the tasks and a person reads the
// items as text. Changing any list changes the generated items (and the golden test file).

#include <array>        // std::array
#include <string_view>  // std::string_view

namespace hylens::tasks::vocab {

/// Dictionary keys: 40 everyday nouns (no overlap with the values).
inline constexpr std::array<std::string_view, 40> keys = {
    "cup",   "book",  "lamp",  "door",  "chair", "table", "pen",   "box",   "hat",    "coat",
    "bag",   "key",   "ring",  "bell",  "ship",  "car",   "bus",   "road",  "tree",   "rock",
    "lake",  "hill",  "house", "room",  "bed",   "desk",  "clock", "phone", "card",   "coin",
    "shoe",  "sock",  "boat",  "train", "river", "wall",  "floor", "map",   "window", "garden"};

/// Dictionary values and list items: 40 colours, animals and fruits.
inline constexpr std::array<std::string_view, 40> values = {
    "red",  "blue",  "green", "gold",  "gray",  "black", "white", "pink",  "brown", "purple",
    "cat",  "dog",   "fox",   "owl",   "bear",  "wolf",  "lion",  "frog",  "duck",  "goat",
    "horse", "mouse", "sheep", "tiger", "deer", "apple", "pear",  "plum",  "lemon", "mango",
    "peach", "grape", "melon", "cherry", "berry", "lime", "kiwi", "fig",   "bean",  "nut"};

/// Neutral English filler sentences (no language, persona or task content).
inline constexpr std::array<std::string_view, 20> filler = {
    "The weather was mild today.",
    "A man walked to the market.",
    "The train left the station on time.",
    "Two friends met at the park.",
    "The shop opens at nine in the morning.",
    "A small boat crossed the lake.",
    "The children played in the yard.",
    "Rain fell on the quiet town.",
    "The old road runs past the farm.",
    "A bird sat on the roof.",
    "The library was full of people.",
    "She closed the window before dinner.",
    "The bus was late again.",
    "A light wind moved the trees.",
    "He painted the fence last week.",
    "The river was calm in the evening.",
    "They cleaned the kitchen together.",
    "The meeting ended before noon.",
    "A dog slept under the table.",
    "The street lamps came on at dusk."};

/// Neutral English questions: none names a language, a persona or a task.
inline constexpr std::array<std::string_view, 20> questions = {
    "What do you like to eat?",
    "How was your day?",
    "Where would you like to travel?",
    "What is your favourite season?",
    "What do you do in the morning?",
    "Do you like music?",
    "What did you do last weekend?",
    "How do you relax after work?",
    "What is your favourite animal?",
    "What do you think of the city?",
    "Do you enjoy reading books?",
    "What makes you happy?",
    "How do you spend your evenings?",
    "What is the best time of the year?",
    "Do you prefer tea or coffee?",
    "What would you like to learn?",
    "How do you feel today?",
    "What is your favourite colour?",
    "Do you like to cook?",
    "What is a good gift for a friend?"};

}  // namespace hylens::tasks::vocab
