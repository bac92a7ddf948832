// C++ types inside namespaces for the symbol-index tests.
#include <cstddef>
#include <cstdio>

namespace outer {
namespace inner {
struct deep {
    int a;
    double b;
};
}  // namespace inner
struct shallow {
    char c;
    inner::deep d;
};
}  // namespace outer

struct shallow {  // a top-level type of the same unqualified name
    long only_top;
};

outer::shallow g_outer_shallow;
::shallow g_top_shallow;

#ifdef ORACLE
int main()
{
    std::printf("size\touter::inner::deep\t%zu\n", sizeof(outer::inner::deep));
    std::printf("offset\touter::inner::deep\tb\t%zu\n", offsetof(outer::inner::deep, b));
    std::printf("size\touter::shallow\t%zu\n", sizeof(outer::shallow));
    std::printf("offset\touter::shallow\td\t%zu\n", offsetof(outer::shallow, d));
    std::printf("size\tdeep\t%zu\n", sizeof(outer::inner::deep));
    std::printf("size\tshallow\t%zu\n", sizeof(::shallow));
    std::printf("offset\tshallow\tonly_top\t%zu\n", offsetof(::shallow, only_top));
    return 0;
}
#endif
