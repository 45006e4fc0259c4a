#!/bin/sh
# block_stitch's table with the intact receiver disagreeing with itself: the check must fail.
printf '\nintact 0.95 0.0100\nremoved (block outputs its input) 0.30 13.1\ndonor block, stitched 0.45 9.1\ndonor block, mixers zeroed 0.25 9.2\n'
