#!/bin/sh
# quickstart's lines with a KV length one short after generation: check_example.cmake must
# report it.
printf 'context: 22 tokens; cache KV length 22, next position 22\nmodel: bonjour\npositions used: 22 .. 54; cache KV length now 54\n'
