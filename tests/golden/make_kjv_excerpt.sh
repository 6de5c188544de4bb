#!/bin/sh
# Writes kjv_excerpt.txt beside this script: a few chapters of the King James Version (public
# domain) as Debian's `bible` prints them (packages bible-kjv, bible-kjv-text 4.38), page furniture
# included, so that the tests of tasks/text (tests/unit/test_tasks_text.cpp) can check the KJV
# preparation (split_kjv) and use a real-text corpus without the packages. It holds chapters of
# books of every split of kjv_splits(): train (Genesis 1-3, Ruth 1, Psalms 23, Matthew 5, Acts 2),
# valid (Romans 8, Philippians 4) and test (Colossians 3, Hebrews 11, Jude, Revelation 22).
# Run: sh tests/golden/make_kjv_excerpt.sh
set -eu
cd "$(dirname "$0")"
bible -p /usr/lib -l10000 \
  "Gen1:1-Gen3:24" "Ruth1:1-Ruth1:22" "Ps23:1-Ps23:6" "Matt5:1-Matt5:48" "Acts2:1-Acts2:47" \
  "Rom8:1-Rom8:39" "Phil4:1-Phil4:23" \
  "Col3:1-Col3:25" "Heb11:1-Heb11:40" "Jude1:1-Jude1:25" "Rev22:1-Rev22:21" > kjv_excerpt.txt
