{
  "targets": [
    {
      "target_name": "cusim",
      "sources": [
        "<!@(node -e \"process.stdout.write(require('fs').readdirSync('native').filter(f=>f.endsWith('.cc')).map(f=>'native/'+f).join(' '))\")",
        "native/cpu_only/no_cuda.cc",
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&process.stdout.write('build-simdjson/simdjson.cpp')\")",
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&require('fs').existsSync('build-libcsv/libcsv.c')&&process.stdout.write('build-libcsv/libcsv.c')\")"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&process.stdout.write('build-simdjson')\")",
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&require('fs').existsSync('build-libcsv/libcsv.c')&&process.stdout.write('build-libcsv')\")"
      ],
      "defines": [
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&process.stdout.write('CUSIM_WITH_SIMDJSON=1')\")",
        "<!@(node -e \"require('fs').existsSync('build-simdjson/simdjson.cpp')&&require('fs').existsSync('build-libcsv/libcsv.c')&&process.stdout.write('CUSIM_WITH_LIBCSV=1')\")",
        "NAPI_VERSION=8",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"
      ],
      "cflags!": [
        "-fno-exceptions"
      ],
      "cflags_cc!": [
        "-fno-exceptions",
        "-fno-rtti"
      ],
      "cflags_cc": [
        "-std=c++17",
        "-O3",
        "-fexceptions",
        "-frtti",
        "-ffp-contract=off",
        "-pthread"
      ],
      "ldflags": [
        "-pthread",
        "-static-libstdc++",
        "-Wl,--version-script=<(module_root_dir)/native/exports.map"
      ]
    }
  ]
}