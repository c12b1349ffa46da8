// api-init-test: an initialization of 60 ms, in C++ (see README.md).
#include "demos-sch.h"
#include <chrono>
#include <cstdio>
#include <err.h>
#include <thread>

int main()
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (demos_init() != 0)
        err(1, "demos_init");
    std::puts("init start");
    // During the initialization a completion changes nothing.
    if (demos_completed() != 0)
        err(1, "demos_completed");
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    std::puts("init done");
    if (demos_initialization_completed() != 0)
        err(1, "demos_initialization_completed");
    return 0;
}
