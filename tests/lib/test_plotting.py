"""dpmf_lib.plotting: the shared figure style (titles name the data and flag stand-ins)."""


def test_titles_name_the_data_and_flag_stand_ins():
    from dpmf_lib.plotting import standin_title

    t = standin_title("Fig", ["ml-100k", "netflix [synthetic stand-in]"])
    assert "data: ml-100k, netflix [synthetic stand-in]" in t and "not the real data" in t
    assert standin_title("Fig", ["ml-100k"]) == "Fig\ndata: ml-100k"
