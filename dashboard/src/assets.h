// The front end's files (dashboard/assets/), built into the binary at build time by
// dashboard/cmake/embed_assets.cmake: the dashboard needs no files at run time and no CDN.
#pragma once

#include <string_view>

namespace orrery::dashboard {

// The bytes of the asset named `name` ("index.html", "app.js", "app.css"); empty when
// there is none. The storage is static: views stay valid for the program's life.
std::string_view Asset(std::string_view name);

}  // namespace orrery::dashboard
