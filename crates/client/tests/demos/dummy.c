/* dummy: waits for a signal forever (see README.md). */
#include <unistd.h>

int main(void)
{
    for (;;)
        pause();
}
