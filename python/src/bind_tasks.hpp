#pragma once
// The channel study's items, prompts and scorers for Python, so that one record of a study can
// be rebuilt by hand (hylens.task_items, hylens.StudyPrompt, hylens.score_answer in
// python/hylens/_tasks.py): _task_items gives the items of tasks/registry.hpp as the JSON of
// `hylens tasks --json`; StudyPrompt is experiments/prompt.hpp's PromptRenderer (the segments
// the study prefills and feeds, its stop ids); _score_answer is the task's scorer with the
// rule rubric (no judge). Items cross as JSON text (tasks/item_json.hpp), read and written by
// the pure-Python side.

#include <hylens/experiments/conditions.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/io/json_depth.hpp>
#include <hylens/tasks/item_json.hpp>
#include <hylens/tasks/registry.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bind_text.hpp"  // parse_family

namespace hylens::python {

namespace pyb = pybind11;

/// An item from its JSON text (an item of _task_items, possibly edited by the caller).
inline tasks::Item task_item_of(const std::string& item_json, const char* who) {
    nlohmann::json j;
    io::check_json_depth(item_json, std::string(who) + ": the item");  // a deep one overflowed the stack when copied
    try {
        j = nlohmann::json::parse(item_json);
    } catch (const nlohmann::json::exception& e) {
        throw pyb::value_error(std::string(who) + ": the item is not JSON: " + e.what());
    }
    return tasks::item_from_json(j);
}

inline void bind_tasks(pyb::module_& m) {
    m.def("_task_items", [](const std::string& task, const std::vector<std::uint64_t>& seeds, std::size_t items,
                            std::size_t start) {
        const tasks::TaskSpec& spec = tasks::find_task(task);
        check(start <= std::numeric_limits<std::size_t>::max() - items, "[task_items] start ", start, " + items ", items,
              " is past the last item index");
        std::vector<std::string> out;
        for (const std::uint64_t seed : seeds)
            for (std::size_t i = start; i < start + items; ++i) out.push_back(tasks::item_to_json(spec.make(seed, i)).dump());
        return out;
    }, pyb::arg("task"), pyb::arg("seeds"), pyb::arg("items"), pyb::arg("start"));

    m.def("_task_info", [](const std::string& task) {
        const tasks::TaskSpec& spec = tasks::find_task(task);
        return std::make_tuple(spec.swap, spec.max_new, spec.description);
    }, pyb::arg("task"));

    m.def("_score_answer", [](const std::string& item_json, const std::string& text, const std::string& condition) {
        const tasks::Item item = task_item_of(item_json, "score_answer");
        const tasks::TaskSpec& spec = tasks::find_task(item.task);
        const experiments::Condition cond = experiments::parse_condition(condition);
        check(!cond.needs_b() || spec.swap, "[score_answer] condition ", condition, " needs a B context, and task ", spec.name,
              " has none (not a swap task)");
        const tasks::Score s = spec.score(item, text, cond.score_context(), nullptr);
        nlohmann::json r = {{"score", s.score}, {"score_fields", s.fields}};
        if (const char* by = experiments::detail::scored_by(s)) r["scored_by"] = by;
        return r.dump();
    }, pyb::arg("item"), pyb::arg("text"), pyb::arg("condition"));

    pyb::class_<experiments::PromptRenderer>(
        m, "StudyPrompt",
        "The channel study's prompt of a chat family: the context segment (bos + prefix + context) it prefills, the "
        "query segment (query + suffix) it feeds after the edited cache, and the end-of-turn ids it stops at.")
        .def(pyb::init([](const Tokenizer& tok, const std::string& family) {
                 return experiments::PromptRenderer(tok, parse_family(family));
             }),
             pyb::arg("tokenizer"), pyb::arg("family"), pyb::keep_alive<1, 2>(),
             "family: 'qwen35', 'granite4', 'falcon_h1' or a model_type; the tokenizer must hold the format's special "
             "tokens (an Error names the missing one).")
        .def_property_readonly("stop_ids", &experiments::PromptRenderer::stop_ids,
                               "Ids of the family's end-of-turn tokens that the tokenizer has.")
        .def("context_text", &experiments::PromptRenderer::context_text, pyb::arg("context"),
             "The context segment's text: bos + prefix + context.")
        .def("query_text", &experiments::PromptRenderer::query_text, pyb::arg("query"),
             "The query segment's text: query + suffix.")
        .def("_render", [](const experiments::PromptRenderer& r, const std::string& item_json) {
            const tasks::Item item = task_item_of(item_json, "StudyPrompt.segments");
            const bool swap = tasks::find_task(item.task).swap;
            const experiments::RenderedItem x = r.render(item, swap);
            nlohmann::json j = {{"context", x.context}, {"query", x.query}};
            if (swap) j["alt_context"] = x.alt_context;
            j["first_token"] = x.first_a ? nlohmann::json(*x.first_a) : nlohmann::json();
            j["first_token_b"] = x.first_b ? nlohmann::json(*x.first_b) : nlohmann::json();
            return j.dump();
        }, pyb::arg("item"))
        .def("until_stop", [](const experiments::PromptRenderer& r, const std::vector<std::int64_t>& ids) {
            return r.until_stop(ids);
        }, pyb::arg("ids"), "(ids up to the first stop id, whether one was produced): the study's answer ids.")
        .def("decode", [](const experiments::PromptRenderer& r, const std::vector<std::int64_t>& ids) {
            for (const std::int64_t id : ids)
                if (id < 0 || id > std::numeric_limits<std::int32_t>::max())
                    throw pyb::value_error("StudyPrompt.decode: token id " + std::to_string(id) + " is out of range");
            return r.decode(ids);
        }, pyb::arg("ids"),
             "The answer text the study scores: the ids decoded, special tokens removed.");
}

}  // namespace hylens::python
