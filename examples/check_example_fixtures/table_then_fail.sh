#!/bin/sh
# Prints block_stitch's table whole, then fails: check_example.cmake must report the exit code.
printf '\nintact 1.00 0.0000\nremoved (block outputs its input) 0.30 13.1\ndonor block, stitched 0.45 9.1\ndonor block, mixers zeroed 0.25 9.2\n'
exit 1
